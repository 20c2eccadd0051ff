/*
 * lakeswap's signature extension for DuckDB: the raw content signature's
 * multiset digest (docs/signatures.md, v3, steps 3-7), computed in C over
 * DuckDB's vectors.
 *
 *   lakeswap_signature(f1, ..., fn)      -> STRUCT(n BIGINT, upper UBIGINT, lower UBIGINT)
 *   lakeswap_signature(row(f1, ..., fn))    the same, for rows wider than 32 fields
 *
 * An aggregate: per group (a partition), the row count and the sums of the two
 * row lanes modulo 2^64. The fields are a row's signed fields in signature
 * column order: integer kinds as their declared DuckDB type (the word is the
 * stored integer: DATE days, TIME/TIMESTAMP/TIMESTAMPTZ microseconds,
 * DECIMAL(p<=18) the unscaled value, BOOLEAN 1/0; DOUBLE and FLOAT the bits
 * of the IEEE-754 double, -0 as +0, NaN as NULL), text kinds as their
 * canonical text (VARCHAR, hashed with MD5).
 *
 * It computes exactly what the SQL form of the signature query computes, only
 * without DuckDB's cost per vector operation: one pass per field over a chunk,
 * MD5 once per distinct short text of a chunk. Tests hold it to the SQL form and
 * to the reference in src/core/signature.ts; the engine checks a row of every
 * physical type against the reference when it loads it.
 *
 * The extension also holds lakeswap's kernel locks (lakeswap_lock.c).
 *
 * Built by scripts/build-native.mjs against the stable C extension API v1.2.0.
 */
#define DUCKDB_EXTENSION_NAME lakeswap_signature
#include "duckdb_extension.h"
#include "lakeswap_lock.h"

#include <stdint.h>
#include <string.h>

DUCKDB_EXTENSION_EXTERN

/* ---- MD5 (RFC 1321) ---------------------------------------------------- */

typedef struct {
	uint32_t a, b, c, d;
} md5_state;

static const uint32_t MD5_K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};

static const uint8_t MD5_R[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9,  14, 20, 5, 9,
                                  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                  4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static uint32_t load32le(const uint8_t *p) {
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t load64le(const uint8_t *p) {
	return (uint64_t)load32le(p) | ((uint64_t)load32le(p + 4) << 32);
}

static void md5_block(md5_state *s, const uint8_t *block) {
	uint32_t m[16];
	for (int i = 0; i < 16; i++) {
		m[i] = load32le(block + 4 * i);
	}
	uint32_t a = s->a, b = s->b, c = s->c, d = s->d;
	for (int i = 0; i < 64; i++) {
		uint32_t f;
		int g;
		if (i < 16) {
			f = (b & c) | (~b & d);
			g = i;
		} else if (i < 32) {
			f = (d & b) | (~d & c);
			g = (5 * i + 1) & 15;
		} else if (i < 48) {
			f = b ^ c ^ d;
			g = (3 * i + 5) & 15;
		} else {
			f = c ^ (b | ~d);
			g = (7 * i) & 15;
		}
		uint32_t t = d;
		d = c;
		c = b;
		uint32_t x = a + f + MD5_K[i] + m[g];
		b = b + ((x << MD5_R[i]) | (x >> (32 - MD5_R[i])));
		a = t;
	}
	s->a += a;
	s->b += b;
	s->c += c;
	s->d += d;
}

/* The MD5 digest of `length` bytes, as its two 64-bit little-endian halves. */
static void md5(const uint8_t *data, uint64_t length, uint64_t out[2]) {
	md5_state s = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
	uint64_t done = 0;
	for (; done + 64 <= length; done += 64) {
		md5_block(&s, data + done);
	}
	uint8_t tail[128];
	uint64_t rest = length - done;
	memset(tail, 0, sizeof(tail));
	memcpy(tail, data + done, rest);
	tail[rest] = 0x80;
	uint64_t tail_length = rest + 1 + 8 <= 64 ? 64 : 128;
	uint64_t bits = length * 8;
	for (int i = 0; i < 8; i++) {
		tail[tail_length - 8 + i] = (uint8_t)(bits >> (8 * i));
	}
	md5_block(&s, tail);
	if (tail_length == 128) {
		md5_block(&s, tail + 64);
	}
	uint8_t digest[16];
	uint32_t words[4] = {s.a, s.b, s.c, s.d};
	for (int i = 0; i < 4; i++) {
		for (int j = 0; j < 4; j++) {
			digest[4 * i + j] = (uint8_t)(words[i] >> (8 * j));
		}
	}
	out[0] = load64le(digest);
	out[1] = load64le(digest + 8);
}

/* ---- The row hash (docs/signatures.md, steps 4-6) ----------------------- */

#define LANE_SEED 0x6c616b6573776170ULL
#define FLAG_BITS 63
#define MASK32 0xffffffffULL
#define MASK31 0x7fffffffULL
#define MASK63 0x7fffffffffffffffULL

typedef struct {
	uint64_t k0; /* below 2^32 */
	int64_t k1;  /* below 2^31 */
} key_pair;

/* Key pair `index` of a lane (0 is the finalizer's, 1 + i is item i's), from the splitmix64 sequence. */
static key_pair lane_key(int lane, uint64_t index) {
	uint64_t state = LANE_SEED + (uint64_t)lane + 0x9e3779b97f4a7c15ULL * (2 * index);
	uint64_t raw[2];
	for (int i = 0; i < 2; i++) {
		state += 0x9e3779b97f4a7c15ULL;
		uint64_t z = state;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		raw[i] = z ^ (z >> 31);
	}
	key_pair pair = {raw[0] & MASK32, (int64_t)(raw[1] & MASK31)};
	return pair;
}

/*
 * (w mod 2^32 XOR k0) * (floor(w / 2^32) XOR k1): a factor in [0, 2^32) times one
 * in [-2^31, 2^31), so the product is exact in a signed 64-bit integer.
 */
static inline int64_t product(int64_t w, key_pair k) {
	int64_t x = (int64_t)(((uint64_t)w & MASK32) ^ k.k0);
	int64_t y = (w >> 32) ^ k.k1;
	return x * y;
}

/* ---- Fields to words ----------------------------------------------------- */

typedef enum { FIELD_INTEGER, FIELD_DOUBLE, FIELD_TEXT } field_kind;

typedef struct {
	duckdb_type physical;
	field_kind kind;
} field_shape;

/* How a vector's values become words; returns 0 for a type the signature has no native form for. */
static int shape_of(duckdb_vector vector, field_shape *shape) {
	duckdb_logical_type type = duckdb_vector_get_column_type(vector);
	duckdb_type id = duckdb_get_type_id(type);
	int ok = 1;
	shape->kind = FIELD_INTEGER;
	shape->physical = id;
	switch (id) {
	case DUCKDB_TYPE_BOOLEAN:
	case DUCKDB_TYPE_UTINYINT:
		shape->physical = DUCKDB_TYPE_UTINYINT;
		break;
	case DUCKDB_TYPE_TINYINT:
	case DUCKDB_TYPE_SMALLINT:
	case DUCKDB_TYPE_INTEGER:
	case DUCKDB_TYPE_BIGINT:
	case DUCKDB_TYPE_USMALLINT:
	case DUCKDB_TYPE_UINTEGER:
		break;
	case DUCKDB_TYPE_DATE:
		shape->physical = DUCKDB_TYPE_INTEGER;
		break;
	case DUCKDB_TYPE_TIME:
	case DUCKDB_TYPE_TIMESTAMP:
	case DUCKDB_TYPE_TIMESTAMP_TZ:
		shape->physical = DUCKDB_TYPE_BIGINT;
		break;
	case DUCKDB_TYPE_DECIMAL:
		if (duckdb_decimal_width(type) > 18) {
			ok = 0;
		} else {
			shape->physical = duckdb_decimal_internal_type(type);
		}
		break;
	case DUCKDB_TYPE_DOUBLE:
	case DUCKDB_TYPE_FLOAT:
		shape->kind = FIELD_DOUBLE;
		break;
	case DUCKDB_TYPE_VARCHAR:
		shape->kind = FIELD_TEXT;
		break;
	default:
		ok = 0;
	}
	duckdb_destroy_logical_type(&type);
	return ok;
}

static inline int valid_at(const uint64_t *validity, idx_t row) {
	return validity == NULL || ((validity[row >> 6] >> (row & 63)) & 1);
}

/*
 * MD5 words of short texts this thread has seen: low-cardinality text costs
 * one MD5 per distinct value, and a column of many values (tail numbers,
 * codes) one per value that is not in the cache. A short text (up to 12 bytes)
 * is inline in its duckdb_string_t, so equal structs are equal texts: the cache
 * compares the 16 bytes (DuckDB zero-fills the unused inline bytes; if it did
 * not, the cache would only miss, never answer wrongly). A digest depends on
 * the text alone, so the cache serves every column, chunk and group of the
 * thread, for as long as the thread lives (one cache per DuckDB worker thread,
 * 512 KiB). Longer texts are hashed every time.
 */
#define TEXT_CACHE_BITS 14
#define TEXT_CACHE_SIZE (1u << TEXT_CACHE_BITS)

typedef struct {
	uint64_t key[2]; /* the duckdb_string_t's bytes; a length of 0xffffffff marks an empty slot */
	int64_t words[2];
} text_cache_entry;

static inline void text_words(const duckdb_string_t *value, text_cache_entry *cache, int64_t words[2]) {
	/* duckdb_string_t as duckdb.h documents it: up to 12 bytes inline, longer ones behind a pointer. */
	uint32_t length = value->value.inlined.length;
	text_cache_entry *slot = NULL;
	uint64_t key[2];
	if (length <= 12) {
		memcpy(key, value, sizeof(key));
		slot = &cache[((key[0] * 0x9e3779b97f4a7c15ULL) ^ (key[1] * 0xc2b2ae3d27d4eb4fULL)) >> (64 - TEXT_CACHE_BITS)];
		if (slot->key[0] == key[0] && slot->key[1] == key[1]) {
			words[0] = slot->words[0];
			words[1] = slot->words[1];
			return;
		}
	}
	const char *bytes = length <= 12 ? value->value.inlined.inlined : value->value.pointer.ptr;
	uint64_t digest[2];
	md5((const uint8_t *)bytes, length, digest);
	words[0] = (int64_t)(digest[0] & MASK63);
	words[1] = (int64_t)(digest[1] >> 1);
	if (slot != NULL) {
		slot->key[0] = key[0];
		slot->key[1] = key[1];
		slot->words[0] = words[0];
		slot->words[1] = words[1];
	}
}

/* Mixes one integer field into the lanes of a chunk: a loop per physical type. */
#define MIX_INTEGERS(TYPE)                                                                                             \
	do {                                                                                                               \
		const TYPE *values = (const TYPE *)data;                                                                       \
		for (idx_t r = 0; r < rows; r++) {                                                                             \
			int64_t w = valid_at(validity, r) ? (int64_t)values[r] : 0;                                                \
			lanes[2 * r] ^= product(w, a);                                                                             \
			lanes[2 * r + 1] ^= product(w, b);                                                                         \
		}                                                                                                              \
	} while (0)

static void mix_integers(int64_t *lanes, idx_t rows, duckdb_type physical, const void *data, const uint64_t *validity,
                         key_pair a, key_pair b) {
	switch (physical) {
	case DUCKDB_TYPE_UTINYINT:
		MIX_INTEGERS(uint8_t);
		break;
	case DUCKDB_TYPE_TINYINT:
		MIX_INTEGERS(int8_t);
		break;
	case DUCKDB_TYPE_SMALLINT:
		MIX_INTEGERS(int16_t);
		break;
	case DUCKDB_TYPE_USMALLINT:
		MIX_INTEGERS(uint16_t);
		break;
	case DUCKDB_TYPE_INTEGER:
		MIX_INTEGERS(int32_t);
		break;
	case DUCKDB_TYPE_UINTEGER:
		MIX_INTEGERS(uint32_t);
		break;
	default:
		MIX_INTEGERS(int64_t);
	}
}

/*
 * The word of a DOUBLE (a FLOAT is widened to double first, exactly): its
 * IEEE-754 binary64 bits read as a signed 64-bit integer, -0 as +0 (word 0).
 * A NaN is NULL (word 0; double_is_null sets its flag). Plain C: the build
 * has no -ffast-math, so x != x tests NaN and x == 0 holds for -0.
 */
static inline int64_t double_word(double x) {
	if (x == 0 || x != x) {
		return 0;
	}
	int64_t w;
	memcpy(&w, &x, sizeof(w));
	return w;
}

/* Whether row r of a DOUBLE/FLOAT field is NULL for the signature: invalid, or NaN. */
static inline int double_is_null(duckdb_type physical, const void *data, const uint64_t *validity, idx_t r) {
	if (!valid_at(validity, r)) {
		return 1;
	}
	double x = physical == DUCKDB_TYPE_FLOAT ? (double)((const float *)data)[r] : ((const double *)data)[r];
	return x != x;
}

/* Mixes one DOUBLE or FLOAT field into the lanes of a chunk. */
#define MIX_DOUBLES(TYPE)                                                                                              \
	do {                                                                                                               \
		const TYPE *values = (const TYPE *)data;                                                                       \
		for (idx_t r = 0; r < rows; r++) {                                                                             \
			int64_t w = valid_at(validity, r) ? double_word((double)values[r]) : 0;                                    \
			lanes[2 * r] ^= product(w, a);                                                                             \
			lanes[2 * r + 1] ^= product(w, b);                                                                         \
		}                                                                                                              \
	} while (0)

static void mix_doubles(int64_t *lanes, idx_t rows, duckdb_type physical, const void *data, const uint64_t *validity,
                        key_pair a, key_pair b) {
	if (physical == DUCKDB_TYPE_FLOAT) {
		MIX_DOUBLES(float);
	} else {
		MIX_DOUBLES(double);
	}
}

/* ---- The lanes of a chunk ----------------------------------------------------- */

/* This thread's text cache, made empty on first use; NULL when out of memory. */
static __thread text_cache_entry *thread_cache = NULL;

static text_cache_entry *thread_text_cache(void) {
	if (thread_cache == NULL) {
		text_cache_entry *cache = duckdb_malloc(sizeof(text_cache_entry) * TEXT_CACHE_SIZE);
		if (cache == NULL) {
			return NULL;
		}
		for (uint32_t i = 0; i < TEXT_CACHE_SIZE; i++) {
			cache[i].key[0] = UINT32_MAX;
			cache[i].key[1] = 0;
		}
		thread_cache = cache;
	}
	return thread_cache;
}

/*
 * Writes the two lanes of each of `rows` rows (lanes[2r], lanes[2r + 1]) from
 * the row's fields, one flat vector per field. Returns NULL, or an error message.
 */
static const char *chunk_lanes(const duckdb_vector *fields, idx_t count, idx_t rows, int64_t *lanes) {
	const char *error = NULL;
	field_shape *shapes = duckdb_malloc(sizeof(field_shape) * (count == 0 ? 1 : count));
	int64_t *flags = duckdb_malloc(sizeof(int64_t) * (rows == 0 ? 1 : rows));
	text_cache_entry *cache = thread_text_cache();
	if (shapes == NULL || flags == NULL || cache == NULL) {
		error = "lakeswap_signature: out of memory";
		goto done;
	}
	for (idx_t j = 0; j < count; j++) {
		if (!shape_of(fields[j], &shapes[j])) {
			error = "lakeswap_signature: a field's type has no native signature form "
			        "(pass integer kinds as their declared type, text kinds as their canonical VARCHAR)";
			goto done;
		}
	}
	memset(lanes, 0, sizeof(int64_t) * 2 * rows);

	uint64_t item = 0;
	for (idx_t j = 0; j < count; j++) {
		const void *data = duckdb_vector_get_data(fields[j]);
		const uint64_t *validity = duckdb_vector_get_validity(fields[j]);
		if (shapes[j].kind == FIELD_INTEGER) {
			mix_integers(lanes, rows, shapes[j].physical, data, validity, lane_key(0, 1 + item), lane_key(1, 1 + item));
			item += 1;
		} else if (shapes[j].kind == FIELD_DOUBLE) {
			mix_doubles(lanes, rows, shapes[j].physical, data, validity, lane_key(0, 1 + item), lane_key(1, 1 + item));
			item += 1;
		} else {
			key_pair a0 = lane_key(0, 1 + item), a1 = lane_key(0, 2 + item);
			key_pair b0 = lane_key(1, 1 + item), b1 = lane_key(1, 2 + item);
			const duckdb_string_t *texts = (const duckdb_string_t *)data;
			for (idx_t r = 0; r < rows; r++) {
				int64_t w[2] = {0, 0};
				if (valid_at(validity, r)) {
					text_words(&texts[r], cache, w);
				}
				lanes[2 * r] ^= product(w[0], a0) ^ product(w[1], a1);
				lanes[2 * r + 1] ^= product(w[0], b0) ^ product(w[1], b1);
			}
			item += 2;
		}
	}
	/* The null flags: bit j % 63 of flag word j / 63 is set when field j is NULL (or a NaN DOUBLE/FLOAT). */
	uint64_t flag_words = count == 0 ? 1 : (count + FLAG_BITS - 1) / FLAG_BITS;
	for (uint64_t q = 0; q < flag_words; q++) {
		memset(flags, 0, sizeof(int64_t) * rows);
		for (idx_t j = q * FLAG_BITS; j < count && j < (q + 1) * FLAG_BITS; j++) {
			const uint64_t *validity = duckdb_vector_get_validity(fields[j]);
			if (shapes[j].kind == FIELD_DOUBLE) {
				const void *data = duckdb_vector_get_data(fields[j]);
				for (idx_t r = 0; r < rows; r++) {
					if (double_is_null(shapes[j].physical, data, validity, r)) {
						flags[r] |= (int64_t)1 << (j % FLAG_BITS);
					}
				}
				continue;
			}
			if (validity == NULL) {
				continue;
			}
			for (idx_t r = 0; r < rows; r++) {
				if (!valid_at(validity, r)) {
					flags[r] |= (int64_t)1 << (j % FLAG_BITS);
				}
			}
		}
		key_pair a = lane_key(0, 1 + item), b = lane_key(1, 1 + item);
		for (idx_t r = 0; r < rows; r++) {
			lanes[2 * r] ^= product(flags[r], a);
			lanes[2 * r + 1] ^= product(flags[r], b);
		}
		item += 1;
	}
	/* The finalizer round. */
	key_pair fa = lane_key(0, 0), fb = lane_key(1, 0);
	for (idx_t r = 0; r < rows; r++) {
		int64_t s = lanes[2 * r], t = lanes[2 * r + 1];
		lanes[2 * r] = s ^ product(s, fa);
		lanes[2 * r + 1] = t ^ product(t, fb);
	}
done:
	duckdb_free(shapes);
	duckdb_free(flags);
	return error;
}

/* ---- The aggregate: lakeswap_signature(row(field, ...)) ------------------------ */

/* A partition's running digest (docs/signatures.md, step 7): its row count and the lane sums, modulo 2^64. */
typedef struct {
	uint64_t rows;
	uint64_t a;
	uint64_t b;
} signature_state;

static idx_t signature_size(duckdb_function_info info) {
	(void)info;
	return sizeof(signature_state);
}

static void signature_init(duckdb_function_info info, duckdb_aggregate_state state) {
	(void)info;
	memset(state, 0, sizeof(signature_state));
}

/* The fields of a chunk: its columns, or the children of its one STRUCT column (lakeswap_signature(row(...))). */
static idx_t chunk_fields(duckdb_data_chunk input, duckdb_vector **fields) {
	idx_t columns = duckdb_data_chunk_get_column_count(input);
	duckdb_vector first = duckdb_data_chunk_get_vector(input, 0);
	duckdb_logical_type first_type = duckdb_vector_get_column_type(first);
	int packed = columns == 1 && duckdb_get_type_id(first_type) == DUCKDB_TYPE_STRUCT;
	idx_t count = packed ? duckdb_struct_type_child_count(first_type) : columns;
	duckdb_destroy_logical_type(&first_type);
	*fields = duckdb_malloc(sizeof(duckdb_vector) * (count == 0 ? 1 : count));
	if (*fields == NULL) {
		return 0;
	}
	for (idx_t j = 0; j < count; j++) {
		(*fields)[j] = packed ? duckdb_struct_vector_get_child(first, j) : duckdb_data_chunk_get_vector(input, j);
	}
	return count;
}

static void signature_update(duckdb_function_info info, duckdb_data_chunk input, duckdb_aggregate_state *states) {
	idx_t rows = duckdb_data_chunk_get_size(input);
	duckdb_vector *fields = NULL;
	idx_t count = chunk_fields(input, &fields);
	int64_t *lanes = duckdb_malloc(sizeof(int64_t) * 2 * (rows == 0 ? 1 : rows));
	const char *error = NULL;
	if (fields == NULL || lanes == NULL) {
		error = "lakeswap_signature: out of memory";
	} else if (count == 0) {
		error = "lakeswap_signature: no fields to sign";
	} else {
		error = chunk_lanes(fields, count, rows, lanes);
	}
	if (error != NULL) {
		duckdb_aggregate_function_set_error(info, error);
	} else {
		for (idx_t r = 0; r < rows; r++) {
			signature_state *state = (signature_state *)states[r];
			state->rows += 1;
			state->a += (uint64_t)lanes[2 * r];
			state->b += (uint64_t)lanes[2 * r + 1];
		}
	}
	duckdb_free(fields);
	duckdb_free(lanes);
}

static void signature_combine(duckdb_function_info info, duckdb_aggregate_state *source, duckdb_aggregate_state *target,
                              idx_t count) {
	(void)info;
	for (idx_t i = 0; i < count; i++) {
		signature_state *from = (signature_state *)source[i];
		signature_state *to = (signature_state *)target[i];
		to->rows += from->rows;
		to->a += from->a;
		to->b += from->b;
	}
}

static void signature_finalize(duckdb_function_info info, duckdb_aggregate_state *source, duckdb_vector result,
                               idx_t count, idx_t offset) {
	(void)info;
	int64_t *rows = (int64_t *)duckdb_vector_get_data(duckdb_struct_vector_get_child(result, 0));
	uint64_t *a = (uint64_t *)duckdb_vector_get_data(duckdb_struct_vector_get_child(result, 1));
	uint64_t *b = (uint64_t *)duckdb_vector_get_data(duckdb_struct_vector_get_child(result, 2));
	for (idx_t i = 0; i < count; i++) {
		signature_state *state = (signature_state *)source[i];
		rows[offset + i] = (int64_t)state->rows;
		a[offset + i] = state->a;
		b[offset + i] = state->b;
	}
}

/* Fields up to this many are passed directly; a wider row as one struct, lakeswap_signature(row(...)). */
#define MAX_DIRECT_FIELDS 32

DUCKDB_EXTENSION_ENTRYPOINT(duckdb_connection connection, duckdb_extension_info info,
                            struct duckdb_extension_access *access) {
	(void)info;
	(void)access;
	duckdb_logical_type any = duckdb_create_logical_type(DUCKDB_TYPE_ANY);
	duckdb_logical_type count_type = duckdb_create_logical_type(DUCKDB_TYPE_BIGINT);
	duckdb_logical_type sum_type = duckdb_create_logical_type(DUCKDB_TYPE_UBIGINT);
	duckdb_logical_type members[3] = {count_type, sum_type, sum_type};
	const char *names[3] = {"n", "upper", "lower"};
	duckdb_logical_type result = duckdb_create_struct_type(members, names, 3);
	duckdb_aggregate_function_set set = duckdb_create_aggregate_function_set("lakeswap_signature");
	int ok = 1;
	for (int arity = 1; arity <= MAX_DIRECT_FIELDS && ok; arity++) {
		duckdb_aggregate_function function = duckdb_create_aggregate_function();
		duckdb_aggregate_function_set_name(function, "lakeswap_signature");
		for (int i = 0; i < arity; i++) {
			duckdb_aggregate_function_add_parameter(function, any);
		}
		/* NULL fields are hashed (as zero words and a flag), never skipped. */
		duckdb_aggregate_function_set_special_handling(function);
		duckdb_aggregate_function_set_return_type(function, result);
		duckdb_aggregate_function_set_functions(function, signature_size, signature_init, signature_update,
		                                        signature_combine, signature_finalize);
		ok = duckdb_add_aggregate_function_to_set(set, function) == DuckDBSuccess;
		duckdb_destroy_aggregate_function(&function);
	}
	ok = ok && duckdb_register_aggregate_function_set(connection, set) == DuckDBSuccess;
	ok = ok && lakeswap_register_lock_functions(connection);
	duckdb_destroy_aggregate_function_set(&set);
	duckdb_destroy_logical_type(&result);
	duckdb_destroy_logical_type(&count_type);
	duckdb_destroy_logical_type(&sum_type);
	duckdb_destroy_logical_type(&any);
	return ok;
}
