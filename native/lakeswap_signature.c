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
 * MD5 once per short text its thread's cache does not hold, eight texts side by
 * side (md5_short_lanes). Tests hold it to the SQL form and
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

static uint32_t load32le(const uint8_t *p) {
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/*
 * MD5's 64 steps over a block's sixteen words m[], written out (a loop with a
 * table of shifts costs half as much again). The same text serves one message
 * (uint32_t words) and several side by side (md5_lanes: one message a lane).
 */
#define MD5_F(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define MD5_G(b, c, d) ((c) ^ ((d) & ((b) ^ (c))))
#define MD5_H(b, c, d) ((b) ^ (c) ^ (d))
#define MD5_I(b, c, d) ((c) ^ ((b) | ~(d)))
#define MD5_STEP(f, a, b, c, d, x, k, r)                                                                               \
	do {                                                                                                               \
		(a) += f((b), (c), (d)) + (x) + (k);                                                                           \
		(a) = (b) + (((a) << (r)) | ((a) >> (32 - (r))));                                                              \
	} while (0)
#define MD5_STEPS(a, b, c, d, m)                                                                                       \
	do {                                                                                                               \
		MD5_STEP(MD5_F, a, b, c, d, m[0], 0xd76aa478u, 7);                                                             \
		MD5_STEP(MD5_F, d, a, b, c, m[1], 0xe8c7b756u, 12);                                                            \
		MD5_STEP(MD5_F, c, d, a, b, m[2], 0x242070dbu, 17);                                                            \
		MD5_STEP(MD5_F, b, c, d, a, m[3], 0xc1bdceeeu, 22);                                                            \
		MD5_STEP(MD5_F, a, b, c, d, m[4], 0xf57c0fafu, 7);                                                             \
		MD5_STEP(MD5_F, d, a, b, c, m[5], 0x4787c62au, 12);                                                            \
		MD5_STEP(MD5_F, c, d, a, b, m[6], 0xa8304613u, 17);                                                            \
		MD5_STEP(MD5_F, b, c, d, a, m[7], 0xfd469501u, 22);                                                            \
		MD5_STEP(MD5_F, a, b, c, d, m[8], 0x698098d8u, 7);                                                             \
		MD5_STEP(MD5_F, d, a, b, c, m[9], 0x8b44f7afu, 12);                                                            \
		MD5_STEP(MD5_F, c, d, a, b, m[10], 0xffff5bb1u, 17);                                                           \
		MD5_STEP(MD5_F, b, c, d, a, m[11], 0x895cd7beu, 22);                                                           \
		MD5_STEP(MD5_F, a, b, c, d, m[12], 0x6b901122u, 7);                                                            \
		MD5_STEP(MD5_F, d, a, b, c, m[13], 0xfd987193u, 12);                                                           \
		MD5_STEP(MD5_F, c, d, a, b, m[14], 0xa679438eu, 17);                                                           \
		MD5_STEP(MD5_F, b, c, d, a, m[15], 0x49b40821u, 22);                                                           \
		MD5_STEP(MD5_G, a, b, c, d, m[1], 0xf61e2562u, 5);                                                             \
		MD5_STEP(MD5_G, d, a, b, c, m[6], 0xc040b340u, 9);                                                             \
		MD5_STEP(MD5_G, c, d, a, b, m[11], 0x265e5a51u, 14);                                                           \
		MD5_STEP(MD5_G, b, c, d, a, m[0], 0xe9b6c7aau, 20);                                                            \
		MD5_STEP(MD5_G, a, b, c, d, m[5], 0xd62f105du, 5);                                                             \
		MD5_STEP(MD5_G, d, a, b, c, m[10], 0x02441453u, 9);                                                            \
		MD5_STEP(MD5_G, c, d, a, b, m[15], 0xd8a1e681u, 14);                                                           \
		MD5_STEP(MD5_G, b, c, d, a, m[4], 0xe7d3fbc8u, 20);                                                            \
		MD5_STEP(MD5_G, a, b, c, d, m[9], 0x21e1cde6u, 5);                                                             \
		MD5_STEP(MD5_G, d, a, b, c, m[14], 0xc33707d6u, 9);                                                            \
		MD5_STEP(MD5_G, c, d, a, b, m[3], 0xf4d50d87u, 14);                                                            \
		MD5_STEP(MD5_G, b, c, d, a, m[8], 0x455a14edu, 20);                                                            \
		MD5_STEP(MD5_G, a, b, c, d, m[13], 0xa9e3e905u, 5);                                                            \
		MD5_STEP(MD5_G, d, a, b, c, m[2], 0xfcefa3f8u, 9);                                                             \
		MD5_STEP(MD5_G, c, d, a, b, m[7], 0x676f02d9u, 14);                                                            \
		MD5_STEP(MD5_G, b, c, d, a, m[12], 0x8d2a4c8au, 20);                                                           \
		MD5_STEP(MD5_H, a, b, c, d, m[5], 0xfffa3942u, 4);                                                             \
		MD5_STEP(MD5_H, d, a, b, c, m[8], 0x8771f681u, 11);                                                            \
		MD5_STEP(MD5_H, c, d, a, b, m[11], 0x6d9d6122u, 16);                                                           \
		MD5_STEP(MD5_H, b, c, d, a, m[14], 0xfde5380cu, 23);                                                           \
		MD5_STEP(MD5_H, a, b, c, d, m[1], 0xa4beea44u, 4);                                                             \
		MD5_STEP(MD5_H, d, a, b, c, m[4], 0x4bdecfa9u, 11);                                                            \
		MD5_STEP(MD5_H, c, d, a, b, m[7], 0xf6bb4b60u, 16);                                                            \
		MD5_STEP(MD5_H, b, c, d, a, m[10], 0xbebfbc70u, 23);                                                           \
		MD5_STEP(MD5_H, a, b, c, d, m[13], 0x289b7ec6u, 4);                                                            \
		MD5_STEP(MD5_H, d, a, b, c, m[0], 0xeaa127fau, 11);                                                            \
		MD5_STEP(MD5_H, c, d, a, b, m[3], 0xd4ef3085u, 16);                                                            \
		MD5_STEP(MD5_H, b, c, d, a, m[6], 0x04881d05u, 23);                                                            \
		MD5_STEP(MD5_H, a, b, c, d, m[9], 0xd9d4d039u, 4);                                                             \
		MD5_STEP(MD5_H, d, a, b, c, m[12], 0xe6db99e5u, 11);                                                           \
		MD5_STEP(MD5_H, c, d, a, b, m[15], 0x1fa27cf8u, 16);                                                           \
		MD5_STEP(MD5_H, b, c, d, a, m[2], 0xc4ac5665u, 23);                                                            \
		MD5_STEP(MD5_I, a, b, c, d, m[0], 0xf4292244u, 6);                                                             \
		MD5_STEP(MD5_I, d, a, b, c, m[7], 0x432aff97u, 10);                                                            \
		MD5_STEP(MD5_I, c, d, a, b, m[14], 0xab9423a7u, 15);                                                           \
		MD5_STEP(MD5_I, b, c, d, a, m[5], 0xfc93a039u, 21);                                                            \
		MD5_STEP(MD5_I, a, b, c, d, m[12], 0x655b59c3u, 6);                                                            \
		MD5_STEP(MD5_I, d, a, b, c, m[3], 0x8f0ccc92u, 10);                                                            \
		MD5_STEP(MD5_I, c, d, a, b, m[10], 0xffeff47du, 15);                                                           \
		MD5_STEP(MD5_I, b, c, d, a, m[1], 0x85845dd1u, 21);                                                            \
		MD5_STEP(MD5_I, a, b, c, d, m[8], 0x6fa87e4fu, 6);                                                             \
		MD5_STEP(MD5_I, d, a, b, c, m[15], 0xfe2ce6e0u, 10);                                                           \
		MD5_STEP(MD5_I, c, d, a, b, m[6], 0xa3014314u, 15);                                                            \
		MD5_STEP(MD5_I, b, c, d, a, m[13], 0x4e0811a1u, 21);                                                           \
		MD5_STEP(MD5_I, a, b, c, d, m[4], 0xf7537e82u, 6);                                                             \
		MD5_STEP(MD5_I, d, a, b, c, m[11], 0xbd3af235u, 10);                                                           \
		MD5_STEP(MD5_I, c, d, a, b, m[2], 0x2ad7d2bbu, 15);                                                            \
		MD5_STEP(MD5_I, b, c, d, a, m[9], 0xeb86d391u, 21);                                                            \
	} while (0)

static void md5_block(md5_state *s, const uint8_t *block) {
	uint32_t m[16];
	for (int i = 0; i < 16; i++) {
		m[i] = load32le(block + 4 * i);
	}
	uint32_t a = s->a, b = s->b, c = s->c, d = s->d;
	MD5_STEPS(a, b, c, d, m);
	s->a += a;
	s->b += b;
	s->c += c;
	s->d += d;
}

/* The digest's two 64-bit little-endian halves: the state words a, b and c, d, each little-endian. */
static void md5_halves(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint64_t out[2]) {
	out[0] = (uint64_t)a | ((uint64_t)b << 32);
	out[1] = (uint64_t)c | ((uint64_t)d << 32);
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
	md5_halves(s.a, s.b, s.c, s.d, out);
}

/*
 * Several MD5s at once: one message per lane of a vector (GCC and Clang vector
 * extensions; the compiler maps them to the machine's SIMD registers, or to
 * plain words). A message of MD5_SHORT bytes or fewer is one block, so eight
 * texts cost about what two cost one after another: one MD5's steps depend on
 * each other, eight side by side do not.
 */
#define MD5_LANES 8
#define MD5_SHORT 55

typedef uint32_t md5_lanes __attribute__((vector_size(4 * MD5_LANES)));

/* The MD5 digests of MD5_LANES texts of at most MD5_SHORT bytes each. */
static void md5_short_lanes(const uint8_t *const texts[MD5_LANES], const uint32_t lengths[MD5_LANES], uint64_t out[MD5_LANES][2]) {
	uint32_t words[16][MD5_LANES];
	for (int l = 0; l < MD5_LANES; l++) {
		uint8_t block[64];
		memset(block, 0, sizeof(block));
		memcpy(block, texts[l], lengths[l]);
		block[lengths[l]] = 0x80;
		uint64_t bits = (uint64_t)lengths[l] * 8;
		for (int i = 0; i < 8; i++) {
			block[56 + i] = (uint8_t)(bits >> (8 * i));
		}
		for (int i = 0; i < 16; i++) {
			words[i][l] = load32le(block + 4 * i);
		}
	}
	md5_lanes m[16];
	memcpy(m, words, sizeof(m));
	md5_lanes zero = {0};
	md5_lanes a = zero + 0x67452301u, b = zero + 0xefcdab89u, c = zero + 0x98badcfeu, d = zero + 0x10325476u;
	MD5_STEPS(a, b, c, d, m);
	a += 0x67452301u;
	b += 0xefcdab89u;
	c += 0x98badcfeu;
	d += 0x10325476u;
	for (int l = 0; l < MD5_LANES; l++) {
		md5_halves(a[l], b[l], c[l], d[l], out[l]);
	}
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

/* The cache slot of a short text (up to 12 bytes: inline, so its 16 bytes are its key), or NULL for a longer one. */
static inline text_cache_entry *cache_slot(const duckdb_string_t *value, text_cache_entry *cache, uint64_t key[2]) {
	/* duckdb_string_t as duckdb.h documents it: up to 12 bytes inline, longer ones behind a pointer. */
	if (value->value.inlined.length > 12) {
		return NULL;
	}
	memcpy(key, value, sizeof(uint64_t) * 2);
	return &cache[((key[0] * 0x9e3779b97f4a7c15ULL) ^ (key[1] * 0xc2b2ae3d27d4eb4fULL)) >> (64 - TEXT_CACHE_BITS)];
}

static inline const uint8_t *text_bytes(const duckdb_string_t *value) {
	return (const uint8_t *)(value->value.inlined.length <= 12 ? value->value.inlined.inlined : value->value.pointer.ptr);
}

/* A text's two words from its MD5 digest (docs/signatures.md, step 3): the digest's bits 0-62 and 65-127. */
static inline void digest_words(const uint64_t digest[2], int64_t words[2]) {
	words[0] = (int64_t)(digest[0] & MASK63);
	words[1] = (int64_t)(digest[1] >> 1);
}

/* The words of the texts of rows `waiting` (at most MD5_LANES, each of at most MD5_SHORT bytes), kept in the cache. */
static void hash_waiting_texts(const duckdb_string_t *texts, const idx_t *waiting, int count, text_cache_entry *cache,
                               int64_t (*words)[2]) {
	const uint8_t *bytes[MD5_LANES];
	uint32_t lengths[MD5_LANES];
	uint64_t digests[MD5_LANES][2];
	for (int l = 0; l < MD5_LANES; l++) {
		/* Lanes without a text of their own hash the first one again. */
		const duckdb_string_t *text = &texts[waiting[l < count ? l : 0]];
		bytes[l] = text_bytes(text);
		lengths[l] = text->value.inlined.length;
	}
	md5_short_lanes(bytes, lengths, digests);
	for (int l = 0; l < count; l++) {
		int64_t *row_words = words[waiting[l]];
		digest_words(digests[l], row_words);
		uint64_t key[2];
		text_cache_entry *slot = cache_slot(&texts[waiting[l]], cache, key);
		if (slot != NULL) {
			slot->key[0] = key[0];
			slot->key[1] = key[1];
			slot->words[0] = row_words[0];
			slot->words[1] = row_words[1];
		}
	}
}

/*
 * The two words of each row's text in a chunk (0 and 0 where it is NULL): from the thread's cache, or from its MD5
 * digest, the short texts MD5_LANES at a time.
 */
static void chunk_text_words(const duckdb_string_t *texts, const uint64_t *validity, idx_t rows, text_cache_entry *cache,
                             int64_t (*words)[2]) {
	idx_t waiting[MD5_LANES];
	int count = 0;
	for (idx_t r = 0; r < rows; r++) {
		words[r][0] = 0;
		words[r][1] = 0;
		if (!valid_at(validity, r)) {
			continue;
		}
		uint64_t key[2];
		text_cache_entry *slot = cache_slot(&texts[r], cache, key);
		if (slot != NULL && slot->key[0] == key[0] && slot->key[1] == key[1]) {
			words[r][0] = slot->words[0];
			words[r][1] = slot->words[1];
			continue;
		}
		uint32_t length = texts[r].value.inlined.length;
		if (length > MD5_SHORT) {
			uint64_t digest[2];
			md5(text_bytes(&texts[r]), length, digest);
			digest_words(digest, words[r]);
			continue;
		}
		waiting[count++] = r;
		if (count == MD5_LANES) {
			hash_waiting_texts(texts, waiting, count, cache, words);
			count = 0;
		}
	}
	if (count > 0) {
		hash_waiting_texts(texts, waiting, count, cache, words);
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
	int64_t (*text_words)[2] = duckdb_malloc(sizeof(int64_t) * 2 * (rows == 0 ? 1 : rows));
	text_cache_entry *cache = thread_text_cache();
	if (shapes == NULL || flags == NULL || text_words == NULL || cache == NULL) {
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
			chunk_text_words((const duckdb_string_t *)data, validity, rows, cache, text_words);
			for (idx_t r = 0; r < rows; r++) {
				int64_t *w = text_words[r];
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
	duckdb_free(text_words);
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
