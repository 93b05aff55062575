-- A database workload for tests/override/run_sqlite.sh: every result printed
-- here must be the same with and without libstrata.so preloaded.
PRAGMA journal_mode = WAL;
PRAGMA cache_size = -32000;
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, payload BLOB, score REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150000)
INSERT INTO item(id, name, grp, payload, score)
  SELECT i, printf('item-%08d-%s', (i * 7919) % 200003, substr('abcdefghijklmnopqrstuvwxyz', i % 26 + 1, i % 11 + 1)),
         i % 1000, zeroblob(i % 700), (i * 37 % 1009) / 7.0
  FROM n;
CREATE INDEX item_name ON item(name);
CREATE INDEX item_grp_score ON item(grp, score);
UPDATE item SET payload = zeroblob((id * 13) % 1500), name = name || '-u' WHERE id % 5 = 0;
DELETE FROM item WHERE id % 7 = 3;
CREATE TABLE summary AS SELECT grp, count(*) AS n, sum(length(payload)) AS bytes, avg(score) AS s FROM item GROUP BY grp;
VACUUM;
SELECT 'rows: ' || count(*) FROM item;
SELECT 'payload bytes: ' || sum(length(payload)) FROM item;
SELECT 'groups: ' || count(*) || ' ' || sum(n) || ' ' || sum(bytes) FROM summary;
SELECT 'first names: ' || group_concat(name, ',') FROM (SELECT name FROM item ORDER BY name LIMIT 5);
SELECT 'top scores: ' || group_concat(id, ',') FROM (SELECT id FROM item ORDER BY score DESC, id LIMIT 10);
SELECT 'distinct: ' || count(DISTINCT substr(name, 1, 10)) FROM item;
SELECT 'integrity_check: ' || integrity_check FROM pragma_integrity_check;
