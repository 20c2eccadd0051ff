"""The seed's upsert (shared/seeds/003, "Upsert into Postgres with ON CONFLICT"), run with psycopg2's executemany.

Called by bench/pg-upsert-bench.ts as `/usr/bin/python3 bench/psycopg2-executemany.py URL CSV BUDGET_MS`. Reads the
delivery's rows (CSV, no header: order_id, customer_id, amount, status, order_ts, day) into a list of dicts before the
clock starts, then times `cur.executemany(sql, rows)` in one transaction, as the chapter does, and the commit. The rows
go in slices of 10,000 so that a budget can stop it: past the budget the other rows are applied untimed with
`execute_values` (the same statement, many rows each) so that the table can still be compared, and the time is
extrapolated linearly. Prints one JSON line.
"""

import csv
import json
import sys
import time

import psycopg2
import psycopg2.extras

SQL = """
    INSERT INTO bench.orders (order_id, customer_id, amount, status, order_ts, day, _lakeswap_updated_at)
    VALUES (%(order_id)s, %(customer_id)s, %(amount)s, %(status)s, %(order_ts)s, %(day)s, NOW())
    ON CONFLICT (order_id) DO UPDATE
    SET customer_id = EXCLUDED.customer_id,
        amount      = EXCLUDED.amount,
        status      = EXCLUDED.status,
        order_ts    = EXCLUDED.order_ts,
        day         = EXCLUDED.day,
        _lakeswap_updated_at = NOW()
"""

REST_SQL = (
    "INSERT INTO bench.orders (order_id, customer_id, amount, status, order_ts, day, _lakeswap_updated_at) VALUES %s "
    + SQL[SQL.index("ON CONFLICT"):]
)

SLICE = 10_000


def main() -> None:
    url, rows_file, budget_ms = sys.argv[1], sys.argv[2], float(sys.argv[3])
    names = ["order_id", "customer_id", "amount", "status", "order_ts", "day"]
    with open(rows_file, newline="") as handle:
        rows = [dict(zip(names, row)) for row in csv.reader(handle)]
    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            started = time.perf_counter()
            cpu_started = time.process_time()
            done = 0
            while done < len(rows) and (time.perf_counter() - started) * 1000 <= budget_ms:
                cur.executemany(SQL, rows[done : done + SLICE])
                done += len(rows[done : done + SLICE])
            measured_ms = (time.perf_counter() - started) * 1000
            measured_cpu_ms = (time.process_time() - cpu_started) * 1000
            rest = rows[done:]
            if rest:
                template = "(%(order_id)s, %(customer_id)s, %(amount)s, %(status)s, %(order_ts)s, %(day)s, NOW())"
                psycopg2.extras.execute_values(cur, REST_SQL, rest, template=template, page_size=10_000)
        commit_started = time.perf_counter()
        conn.commit()
        commit_ms = (time.perf_counter() - commit_started) * 1000
    finally:
        conn.close()
    print(json.dumps({
        "client": f"psycopg2 {psycopg2.__version__}, libpq {psycopg2.extensions.libpq_version()}, Python {sys.version.split()[0]}",
        "measuredRows": done,
        "measuredMs": measured_ms,
        "measuredCpuMs": measured_cpu_ms,
        "commitMs": commit_ms,
        "restRows": len(rest),
    }))


if __name__ == "__main__":
    main()
