import { expect } from 'chai';
import { MongoClient, MongoServerError, type Db } from 'mongodb';
import { psqlRunner, type SqlRunner } from '../../scripts/ferretdb-pg-setup.js';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { startFerretDb, type PostgresFerretDb } from '../helpers/services.js';

interface VersionedDoc {
  _id: string;
  seq: number;
  note?: string;
  feedback_record_id?: string;
  feedback_dataset_id?: string;
}

/** The condition FerretDB pushed down to PostgreSQL for `filter`, as its explain reports it. */
async function pushedDownCondition(db: Db, collection: string, filter: Record<string, unknown>): Promise<string> {
  const explained = (await db.command({ explain: { find: collection, filter } })) as { filterPushdown?: boolean; queryPlanner?: { Plan?: unknown } };
  expect(explained.filterPushdown, JSON.stringify(explained)).to.equal(true);
  const conditions: string[] = [];
  const walk = (node: unknown) => {
    if (typeof node !== 'object' || node === null) return;
    const plan = node as Record<string, unknown>;
    for (const key of ['Filter', 'Recheck Cond', 'Index Cond']) if (typeof plan[key] === 'string') conditions.push(plan[key]);
    if (Array.isArray(plan['Plans'])) for (const child of plan['Plans']) walk(child);
  };
  walk(explained.queryPlanner?.Plan);
  expect(conditions.length, JSON.stringify(explained)).to.be.greaterThan(0);
  return conditions[0]!;
}

describe('ferretdb on postgresql: startFerretDb({ backend: postgresql }) and scripts/ferretdb-pg-setup.ts', function () {
  this.timeout(120_000);
  const database = 'fi_pg_setup';
  let ferret: PostgresFerretDb;
  let client: MongoClient;
  let db: Db;
  let sql: SqlRunner;

  before(async () => {
    ferret = await startFerretDb({ backend: 'postgresql' });
    client = new MongoClient(ferret.url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000, retryWrites: false });
    db = client.db(database);
    sql = psqlRunner(ferret.postgres.url);
  });

  after(async () => {
    await client?.close();
    await ferret?.destroy();
  });

  it('creates every project collection and a GIN index per collection table, and does nothing more the second time', async () => {
    const first = await ferret.setupDatabase(database);
    expect([...first.created].sort()).to.deep.equal(Object.values(COLLECTIONS).sort());
    const again = await ferret.setupDatabase(database);
    expect(again.created).to.deep.equal([]);
    expect([...again.indexes].sort()).to.deep.equal([...first.indexes].sort());

    const gin = await sql.query(`SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = '${database}' AND indexdef LIKE '%USING gin%' ORDER BY 1, 2`);
    const tables = await sql.query(`SELECT _jsonb->>'_id', _jsonb->>'table' FROM "${database}"._ferretdb_database_metadata`);
    expect(tables).to.have.length(Object.values(COLLECTIONS).length);
    for (const [collection, table] of tables) {
      const defs = gin.filter(([t]) => t === table).map(([, def]) => def);
      expect(defs.some((d) => d?.includes(`(_jsonb -> '_id'::text)`)), `${collection}: ${defs.join('; ')}`).to.equal(true);
    }
    expect(gin).to.have.length(first.indexes.length);
  });

  it('answers _id lookups and conditional upserts after setup', async () => {
    const responses = db.collection<VersionedDoc>(COLLECTIONS.responses);
    await responses.insertMany([
      { _id: 'resp-1', seq: 1, note: 'first', feedback_record_id: 'rec-1' },
      { _id: 'resp-2', seq: 5, note: 'other', feedback_record_id: 'rec-2' },
    ]);
    expect(await responses.findOne({ _id: 'resp-1' })).to.deep.include({ _id: 'resp-1', seq: 1, note: 'first' });
    expect(await responses.findOne({ _id: 'missing' })).to.equal(null);

    const newer = await responses.updateOne({ _id: 'resp-1', seq: { $lt: 2 } }, { $set: { seq: 2, note: 'second' } }, { upsert: true });
    expect(newer.modifiedCount).to.equal(1);
    expect(await responses.findOne({ _id: 'resp-1' })).to.deep.include({ seq: 2, note: 'second' });

    // An older version must not overwrite: its filter matches nothing, and the upsert's insert
    // collides with the stored _id.
    let stale: unknown;
    try {
      await responses.updateOne({ _id: 'resp-1', seq: { $lt: 1 } }, { $set: { seq: 1, note: 'stale' } }, { upsert: true });
    } catch (err) {
      stale = err;
    }
    expect(stale).to.be.instanceOf(MongoServerError);
    expect((stale as MongoServerError).code).to.equal(11000);
    expect(await responses.findOne({ _id: 'resp-1' })).to.deep.include({ seq: 2, note: 'second' });

    const inserted = await responses.updateOne({ _id: 'resp-3', seq: { $lt: 1 } }, { $set: { seq: 1, note: 'new' } }, { upsert: true });
    expect(inserted.upsertedId).to.equal('resp-3');
    expect(await responses.find({ _id: { $in: ['resp-1', 'resp-2', 'resp-3'] } }).sort({ _id: 1 }).toArray()).to.have.length(3);
  });

  it('serves the filters FerretDB pushes down (_id, feedback_record_id, feedback_dataset_id) from the GIN indexes', async () => {
    await db.collection<VersionedDoc>(COLLECTIONS.records).insertOne({ _id: 'rec-1', seq: 1, feedback_dataset_id: 'ds-1' });
    const tables = new Map((await sql.query(`SELECT _jsonb->>'_id', _jsonb->>'table' FROM "${database}"._ferretdb_database_metadata`)).map(([c, t]) => [c, t]));
    const cases: Array<[string, Record<string, unknown>]> = [
      [COLLECTIONS.responses, { _id: 'resp-1' }],
      [COLLECTIONS.responses, { feedback_record_id: 'rec-1' }],
      [COLLECTIONS.responses, { feedback_dataset_id: 'ds-1' }],
      [COLLECTIONS.records, { _id: 'rec-1' }],
      [COLLECTIONS.records, { feedback_dataset_id: 'ds-1' }],
    ];
    for (const [collection, filter] of cases) {
      const condition = await pushedDownCondition(db, collection, filter);
      const table = tables.get(collection)!;
      // With sequential scans off, PostgreSQL uses an index whenever one can answer the condition;
      // a tiny table would otherwise be scanned whatever indexes it has.
      const rows = await sql.query(`SET enable_seqscan = off; EXPLAIN (FORMAT JSON) SELECT _jsonb FROM "${database}"."${table}" WHERE ${condition}`);
      const plan = rows.map((columns) => columns.join(' ')).join('\n');
      expect(plan, `${collection} ${JSON.stringify(filter)}: ${condition}`).to.match(/"Index Name": "[^"]*_gin"/);
    }
  });

  it('indexes a collection created after setup when asked again', async () => {
    await db.createCollection('created_later');
    const names = await ferret.indexDatabase(database);
    const [row] = await sql.query(
      `SELECT count(*) FROM pg_indexes i JOIN "${database}"._ferretdb_database_metadata m ON i.tablename = m._jsonb->>'table' WHERE i.schemaname = '${database}' AND m._jsonb->>'_id' = 'created_later' AND i.indexdef LIKE '%USING gin%'`,
    );
    expect(row).to.deep.equal(['1']);
    expect(names).to.have.length(Object.values(COLLECTIONS).length + 3 + 1);
  });
});
