import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import type { MongoClient } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';

/**
 * Store setup for the MongoDB stand-in only: FerretDB v1 on PostgreSQL. FerretDB pushes an
 * equality filter down as `(_jsonb->'field') @> '"value"'`, which the btree indexes it creates
 * cannot serve, so every such read is a table scan. A GIN index on the same expression serves it.
 * Never run this against MongoDB: it writes to FerretDB's PostgreSQL tables behind its back.
 */

/** Runs SQL on the PostgreSQL database that FerretDB stores into; rows of text columns. */
export interface SqlRunner {
  query(sql: string): Promise<string[][]>;
}

const execFileAsync = promisify(execFile);
/** Column separator of psql's unaligned output: a byte no identifier of ours contains. */
const FIELD_SEPARATOR = '\u001f';

/**
 * A SqlRunner through the `psql` command (the project has no PostgreSQL driver). `url` is a
 * libpq connection URI, e.g. `postgres://postgres@127.0.0.1:54329/ferretdb`.
 */
export function psqlRunner(url: string, options: { psqlBin?: string } = {}): SqlRunner {
  return {
    async query(sql) {
      const args = ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-t', '-A', '-F', FIELD_SEPARATOR, '-d', url, '-c', sql];
      const { stdout } = await execFileAsync(options.psqlBin ?? 'psql', args, { maxBuffer: 16 * 1024 * 1024 });
      return stdout
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => line.split(FIELD_SEPARATOR));
    },
  };
}

/** Fields besides `_id` that the project filters on by equality, per collection. */
const GIN_FIELDS: Readonly<Record<string, readonly string[]>> = {
  [COLLECTIONS.records]: ['feedback_dataset_id'],
  // feedback_dataset_id: the read API's `updated_since` looks up a dataset's responses.
  [COLLECTIONS.responses]: ['feedback_record_id', 'feedback_dataset_id'],
};

interface CollectionTable {
  readonly collection: string;
  readonly table: string;
}

export interface SetupReport {
  /** Collections this call created (the others existed). */
  readonly created: readonly string[];
  /** The GIN indexes of the database afterwards, by name (existing ones included). */
  readonly indexes: readonly string[];
}

interface FerretDbPgSetup {
  /** Creates the project's collections that are missing, then indexes every collection's table. */
  setupDatabase(database: string): Promise<SetupReport>;
  /**
   * GIN indexes on `_jsonb->'_id'` for every collection table of `database`, and on the fields of
   * GIN_FIELDS; for collections created after setupDatabase (by the worker, a test, the bench).
   * Idempotent. Returns the index names.
   */
  indexDatabase(database: string): Promise<string[]>;
  /** Collection name → PostgreSQL table, from FerretDB's metadata table of `database`. */
  tables(database: string): Promise<CollectionTable[]>;
}

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

/** PostgreSQL cuts identifiers at 63 bytes; long names keep a readable head and a hash. */
function indexName(table: string, field: string): string {
  const readable = `${table}_${field}_gin`;
  if (Buffer.byteLength(readable) <= 63) return readable;
  return `${readable.slice(0, 50)}_${createHash('sha256').update(readable).digest('hex').slice(0, 12)}`;
}

/** NamespaceExists: createCollection of a collection that is there already. */
const NAMESPACE_EXISTS = 48;

export function createFerretDbPgSetup(deps: { client: MongoClient; sql: SqlRunner }): FerretDbPgSetup {
  const { client, sql } = deps;

  async function tables(database: string): Promise<CollectionTable[]> {
    // FerretDB's PostgreSQL backend keeps each database in the schema of the same name.
    const schema = await sql.query(`SELECT 1 FROM pg_namespace WHERE nspname = ${literal(database)}`);
    if (schema.length === 0) return [];
    const rows = await sql.query(`SELECT _jsonb->>'_id', _jsonb->>'table' FROM ${ident(database)}._ferretdb_database_metadata ORDER BY 1`);
    return rows.map(([collection = '', table = '']) => ({ collection, table }));
  }

  async function indexDatabase(database: string): Promise<string[]> {
    const names: string[] = [];
    for (const { collection, table } of await tables(database)) {
      for (const field of ['_id', ...(GIN_FIELDS[collection] ?? [])]) {
        const name = indexName(table, field);
        // fastupdate off: with it on, new entries wait in a pending list (up to 4 MB) that every
        // search scans linearly until a vacuum merges it, and the worker reads what it has just
        // written. ALTER as well, for indexes an earlier setup created with the default.
        await sql.query(`CREATE INDEX IF NOT EXISTS ${ident(name)} ON ${ident(database)}.${ident(table)} USING gin ((_jsonb -> ${literal(field)})) WITH (fastupdate = off)`);
        await sql.query(`ALTER INDEX ${ident(database)}.${ident(name)} SET (fastupdate = off)`);
        names.push(name);
      }
    }
    return names;
  }

  async function setupDatabase(database: string): Promise<SetupReport> {
    const db = client.db(database);
    const created: string[] = [];
    for (const name of Object.values(COLLECTIONS)) {
      try {
        await db.createCollection(name);
        created.push(name);
      } catch (err) {
        if ((err as { code?: unknown }).code !== NAMESPACE_EXISTS) throw err;
      }
    }
    return { created, indexes: await indexDatabase(database) };
  }

  return { setupDatabase, indexDatabase, tables };
}
