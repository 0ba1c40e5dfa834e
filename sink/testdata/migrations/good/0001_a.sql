-- a table
CREATE TABLE IF NOT EXISTS {db}.a (x UInt8)
ENGINE = MergeTree ORDER BY x;
