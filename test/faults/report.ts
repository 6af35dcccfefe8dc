import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LedgerReport } from './ledger.js';
import { ARTIFACTS } from '../../devkit/processes.js';
import { endRunIfHeld } from '../helpers/held-run.js';

/** Figures of one scenario, as the lead puts them in docs/reliability.md. */
interface ScenarioFigures {
  readonly fault: string;
  readonly requests: number;
  readonly acknowledged: number;
  readonly stored: number;
  readonly duplicated: number;
  readonly lost: number;
  readonly dead_lettered: number;
  readonly refused: number;
  readonly unanswered: number;
  readonly unanswered_stored: number;
  readonly answers_5xx: number;
  readonly [extra: string]: unknown;
}

interface FuzzFigures {
  readonly bad_inputs_tried: number;
  readonly accepted_valid: number;
  readonly answers_4xx: number;
  readonly answers_5xx: number;
  readonly [extra: string]: unknown;
}

const scenarios = new Map<string, ScenarioFigures & { passed?: boolean }>();
const fuzz = new Map<string, FuzzFigures & { passed?: boolean }>();
const checks = new Map<string, { passed?: boolean }>();
const started = Date.now();

/** Turns a verified ledger into the figures of a scenario. */
export function ledgerFigures(fault: string, r: LedgerReport, extra: Record<string, unknown> = {}, fiveXx = 0): ScenarioFigures {
  return {
    fault,
    requests: r.requests,
    acknowledged: r.acknowledged,
    stored: r.stored,
    duplicated: r.duplicated,
    lost: r.acknowledged - r.stored - r.deadLettered,
    dead_lettered: r.deadLettered,
    refused: r.outcomes.refused + r.outcomes.unsent,
    unanswered: r.outcomes.unknown,
    unanswered_stored: r.unknownStored,
    answers_5xx: fiveXx,
    ...extra,
  };
}

export function recordScenario(title: string, figures: ScenarioFigures): void {
  scenarios.set(title, { ...figures });
}

export function recordFuzz(title: string, figures: FuzzFigures): void {
  fuzz.set(title, { ...figures });
}

function sum<T>(items: Iterable<T>, f: (t: T) => number): number {
  let s = 0;
  for (const i of items) s += f(i);
  return s;
}

/** Root hooks of the fault suite: note each test's result, write test-artifacts/reliability.json at the end. */
export const mochaHooks = {
  afterEach(this: Mocha.Context) {
    const test = this.currentTest;
    if (test === undefined) return;
    const title = test.fullTitle();
    const passed = test.state === 'passed';
    const s = scenarios.get(title);
    if (s !== undefined) s.passed = passed;
    const f = fuzz.get(title);
    if (f !== undefined) f.passed = passed;
    checks.set(title, { passed });
  },
  afterAll() {
    endRunIfHeld();
    const s = [...scenarios.entries()].map(([test, fig]) => ({ test, ...fig }));
    const f = [...fuzz.entries()].map(([test, fig]) => ({ test, ...fig }));
    const summary = {
      generated_at: new Date().toISOString(),
      duration_seconds: Math.round((Date.now() - started) / 1000),
      tests: { total: checks.size, passed: [...checks.values()].filter((c) => c.passed === true).length },
      totals: {
        faults_injected: s.length,
        faults_survived: s.filter((x) => x.passed === true).length,
        writes_acknowledged: sum(s, (x) => x.acknowledged),
        writes_stored: sum(s, (x) => x.stored),
        writes_dead_lettered_as_expected: sum(s, (x) => x.dead_lettered),
        writes_duplicated: sum(s, (x) => x.duplicated),
        writes_lost: sum(s, (x) => x.lost),
        bad_inputs_tried: sum(f, (x) => x.bad_inputs_tried),
        answers_5xx_to_bad_inputs: sum(f, (x) => x.answers_5xx),
      },
      scenarios: s,
      fuzzing: f,
      checks: Object.fromEntries(checks),
    };
    mkdirSync(ARTIFACTS, { recursive: true });
    writeFileSync(join(ARTIFACTS, 'reliability.json'), JSON.stringify(summary, null, 2) + '\n');
  },
};
