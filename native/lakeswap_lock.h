/* lakeswap's kernel locks in its DuckDB extension (lakeswap_lock.c). */
#ifndef LAKESWAP_LOCK_H
#define LAKESWAP_LOCK_H

#include "duckdb_extension.h"

/* Registers lakeswap_flock and lakeswap_funlock on `connection`; returns 0 when DuckDB refused one. */
int lakeswap_register_lock_functions(duckdb_connection connection);

#endif
