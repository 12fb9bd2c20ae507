-- 0004: new jobs default to 'available', so the bulk COPY path can leave the state column out.
ALTER TABLE crawlq_job ALTER COLUMN state SET DEFAULT 'available';
