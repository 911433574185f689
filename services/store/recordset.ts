// Rows sent to a statement as one JSON parameter (json_to_recordset, jsonb_to_recordset) and
// joined to tables there.

/**
 * Every row of such a parameter carries this mark (a column `mark int`), and the statement keeps
 * the rows that have it (`WHERE x.mark = $n`, $n = ROWS_MARK): always all of them. The test is for
 * PostgreSQL's planner, which estimates a recordset function at 100 rows whatever its argument; an
 * equality with a parameter makes that one row.
 *
 * Why it matters: a connection runs a prepared statement on a generic plan from its sixth
 * execution on, made for the tables as they were then, and keeps it as they grow (until an
 * ANALYZE, which PGlite and a server without autovacuum never run). Planned for 100 rows against
 * the small tables of a new database, a join finds its rows by a sequential scan (or a scan of a
 * whole account) and a hash join, and goes on doing so when the table holds millions of rows:
 * the session batch did (`npm run bench:api` found PostgreSQL at 85% of a core and answers
 * seconds late), and so did the limit counters read of every evaluation and the audience
 * membership changes. Planned for one row, the rows are looked up by index at any size
 * (test/integration/generic-plans.test.ts).
 */
export const ROWS_MARK = 1;
