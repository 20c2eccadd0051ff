/*
 * lakeswap's kernel lock (flock(2)) without a child process: Node has no
 * flock API, and a flock(1) child per lock costs a fork of the whole process.
 *
 *   lakeswap_flock(path VARCHAR)  -> BIGINT   a descriptor holding the lock, or -1 when it is held
 *   lakeswap_funlock(fd BIGINT)   -> BOOLEAN  closes it (the lock goes with it); true
 *
 * lakeswap_flock opens `path` (created when missing, mode 0666 less the umask,
 * as flock(1) does) as a new open file description, close-on-exec so that no
 * child process ever inherits the lock, and takes flock(LOCK_EX | LOCK_NB) on
 * it. Another open file description's lock, of this process or another, makes
 * it answer -1 (EWOULDBLOCK); any other failure is an error naming the path.
 * The lock lives until lakeswap_funlock closes the descriptor or the process
 * ends, however it ends (the kernel closes its descriptors).
 *
 * lakeswap_funlock closes only a descriptor lakeswap_flock opened and has not
 * closed yet (a list of them is kept), so a stray number never closes another
 * file of the process. Both are volatile: DuckDB never folds them into a
 * constant nor runs them more often than asked (one row, one call).
 */
#define _DEFAULT_SOURCE
#define _DARWIN_C_SOURCE
#define DUCKDB_EXTENSION_NAME lakeswap_signature
#include "lakeswap_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

DUCKDB_EXTENSION_EXTERN

/* ---- The descriptors lakeswap_flock opened and still holds --------------- */

static atomic_flag held_guard = ATOMIC_FLAG_INIT;
static int *held_fds = NULL;
static size_t held_count = 0;
static size_t held_capacity = 0;

static void held_lock(void) {
	while (atomic_flag_test_and_set_explicit(&held_guard, memory_order_acquire)) {
	}
}

static void held_unlock(void) {
	atomic_flag_clear_explicit(&held_guard, memory_order_release);
}

/* Adds `fd` to the list; returns 0 when out of memory. */
static int held_add(int fd) {
	held_lock();
	int ok = 1;
	if (held_count == held_capacity) {
		size_t capacity = held_capacity == 0 ? 16 : 2 * held_capacity;
		int *grown = duckdb_malloc(sizeof(int) * capacity);
		if (grown == NULL) {
			ok = 0;
		} else {
			if (held_count > 0) {
				memcpy(grown, held_fds, sizeof(int) * held_count);
			}
			duckdb_free(held_fds);
			held_fds = grown;
			held_capacity = capacity;
		}
	}
	if (ok) {
		held_fds[held_count++] = fd;
	}
	held_unlock();
	return ok;
}

/* Removes `fd` from the list; returns 0 when it was not there. */
static int held_remove(int fd) {
	held_lock();
	int found = 0;
	for (size_t i = 0; i < held_count; i++) {
		if (held_fds[i] == fd) {
			held_fds[i] = held_fds[--held_count];
			found = 1;
			break;
		}
	}
	held_unlock();
	return found;
}

/* ---- lakeswap_flock(path) ------------------------------------------------ */

/* Takes the lock of `path`: a descriptor, -1 when another open file description holds it, -2 with `error` set otherwise. */
static int64_t take_lock(const char *path, char *error, size_t error_size) {
	int fd;
	do {
		fd = open(path, O_RDONLY | O_NOCTTY | O_CREAT | O_CLOEXEC, 0666);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		snprintf(error, error_size, "lakeswap_flock: cannot open '%s': %s", path, strerror(errno));
		return -2;
	}
	int locked;
	do {
		locked = flock(fd, LOCK_EX | LOCK_NB);
	} while (locked != 0 && errno == EINTR);
	if (locked != 0) {
		int cause = errno;
		close(fd);
		if (cause == EWOULDBLOCK) {
			return -1;
		}
		snprintf(error, error_size, "lakeswap_flock: cannot lock '%s': %s", path, strerror(cause));
		return -2;
	}
	if (!held_add(fd)) {
		close(fd);
		snprintf(error, error_size, "lakeswap_flock: out of memory locking '%s'", path);
		return -2;
	}
	return fd;
}

static void flock_function(duckdb_function_info info, duckdb_data_chunk input, duckdb_vector output) {
	idx_t rows = duckdb_data_chunk_get_size(input);
	duckdb_vector paths = duckdb_data_chunk_get_vector(input, 0);
	duckdb_string_t *values = (duckdb_string_t *)duckdb_vector_get_data(paths);
	const uint64_t *validity = duckdb_vector_get_validity(paths);
	int64_t *result = (int64_t *)duckdb_vector_get_data(output);
	char error[4096 + 128];
	for (idx_t r = 0; r < rows; r++) {
		if (validity != NULL && !((validity[r >> 6] >> (r & 63)) & 1)) {
			duckdb_scalar_function_set_error(info, "lakeswap_flock: the path is NULL");
			return;
		}
		uint32_t length = duckdb_string_t_length(values[r]);
		const char *bytes = duckdb_string_t_data(&values[r]);
		char *path = duckdb_malloc(length + 1);
		if (path == NULL) {
			duckdb_scalar_function_set_error(info, "lakeswap_flock: out of memory");
			return;
		}
		memcpy(path, bytes, length);
		path[length] = '\0';
		if (length == 0 || strlen(path) != length) {
			duckdb_free(path);
			duckdb_scalar_function_set_error(info, "lakeswap_flock: the path is empty or holds a NUL byte");
			return;
		}
		result[r] = take_lock(path, error, sizeof(error));
		duckdb_free(path);
		if (result[r] == -2) {
			duckdb_scalar_function_set_error(info, error);
			return;
		}
	}
}

/* ---- lakeswap_funlock(fd) ------------------------------------------------ */

static void funlock_function(duckdb_function_info info, duckdb_data_chunk input, duckdb_vector output) {
	idx_t rows = duckdb_data_chunk_get_size(input);
	duckdb_vector fds = duckdb_data_chunk_get_vector(input, 0);
	const int64_t *values = (const int64_t *)duckdb_vector_get_data(fds);
	const uint64_t *validity = duckdb_vector_get_validity(fds);
	bool *result = (bool *)duckdb_vector_get_data(output);
	char error[128];
	for (idx_t r = 0; r < rows; r++) {
		int64_t fd = values[r];
		int valid = validity == NULL || ((validity[r >> 6] >> (r & 63)) & 1);
		if (!valid || fd < 0 || fd > INT32_MAX || !held_remove((int)fd)) {
			snprintf(error, sizeof(error), "lakeswap_funlock: %lld is not a lock lakeswap_flock holds", valid ? (long long)fd : -1LL);
			duckdb_scalar_function_set_error(info, error);
			return;
		}
		/* Closed whatever close says: on Linux the descriptor is gone even when it reports EINTR. */
		close((int)fd);
		result[r] = true;
	}
}

/* ---- Registration --------------------------------------------------------- */

static int register_scalar(duckdb_connection connection, const char *name, duckdb_type parameter, duckdb_type returned,
                           duckdb_scalar_function_t body) {
	duckdb_scalar_function function = duckdb_create_scalar_function();
	duckdb_logical_type parameter_type = duckdb_create_logical_type(parameter);
	duckdb_logical_type return_type = duckdb_create_logical_type(returned);
	duckdb_scalar_function_set_name(function, name);
	duckdb_scalar_function_add_parameter(function, parameter_type);
	duckdb_scalar_function_set_return_type(function, return_type);
	/* Its effect is the point: never folded into a constant, never run for rows it was not asked for. */
	duckdb_scalar_function_set_volatile(function);
	/* A NULL argument reaches the function (which refuses it) instead of answering NULL. */
	duckdb_scalar_function_set_special_handling(function);
	duckdb_scalar_function_set_function(function, body);
	int ok = duckdb_register_scalar_function(connection, function) == DuckDBSuccess;
	duckdb_destroy_logical_type(&parameter_type);
	duckdb_destroy_logical_type(&return_type);
	duckdb_destroy_scalar_function(&function);
	return ok;
}

int lakeswap_register_lock_functions(duckdb_connection connection) {
	return register_scalar(connection, "lakeswap_flock", DUCKDB_TYPE_VARCHAR, DUCKDB_TYPE_BIGINT, flock_function) &&
	       register_scalar(connection, "lakeswap_funlock", DUCKDB_TYPE_BIGINT, DUCKDB_TYPE_BOOLEAN, funlock_function);
}
