/**
 * The tasks' full form: what GET /v1/tasks?full=1 returns, POST /v1/tasks/import and
 * --tasks-file load. The head's matrix travels as base64 float32 (little-endian) with
 * its sha256; everything else is JSON numbers, exact for float64. Parsing checks every
 * field (types, lengths, finiteness, the match key against the options) so that a
 * malformed import is refused whole before anything is stored.
 */
import { createHash } from 'crypto';
import { MAX_OPTIONS } from '../rendering/labels';
import { AbstentionTask } from './abstention/task';
import { HeadForm } from './fit/head';
import { explainedParts } from './fit/part-reasons';
import { matchKeyOf, Task, TASKS_FORMAT } from './task';

export interface FormProblem {
  loc: (string | number)[];
  msg: string;
  /** The kind of problem where it is not a field's value (`value_error`). */
  type?: string;
}

export const TASK_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const TASK_ID_RULE = '1 to 128 characters: letters, digits, ".", "_" or "-", starting with a letter or digit';

function encodeMatrix(W: Float32Array): { data: string; sha256: string } {
  const bytes = Buffer.from(W.buffer, W.byteOffset, W.byteLength);
  return { data: bytes.toString('base64'), sha256: createHash('sha256').update(bytes).digest('hex') };
}

/** A task's summary: everything but the fitted arrays. */
export function summaryOf(t: Task) {
  const { calibration: _c, head: _h, fingerprint_components: _f, ...rest } = t;
  return rest;
}

export function fullFormOf(t: Task) {
  return {
    ...t,
    head: t.head && { form: t.head.form, lambda: t.head.lambda, d: t.head.d, W: { dtype: 'float32', shape: [t.options.length, t.head.d], ...encodeMatrix(t.head.W) }, c: t.head.c },
  };
}

/** Abstention tasks are all JSON: their full form is the stored one. */
export function exportForm(tasks: Task[], abstention: AbstentionTask[], fingerprint: string) {
  return { format: TASKS_FORMAT, fingerprint, tasks: tasks.map(fullFormOf), abstention_tasks: abstention };
}

export const isObject = (v: unknown): v is Record<string, any> => v !== null && typeof v === 'object' && !Array.isArray(v);
const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Adds one problem of a stored task form, at `path` below the form. */
type AddFormProblem = (path: (string | number)[], msg: string) => void;

/** A stored form's problems, gathered under `loc`. */
export function problemsAt(loc: (string | number)[]): { problems: FormProblem[]; bad: AddFormProblem } {
  const problems: FormProblem[] = [];
  return { problems, bad: (path, msg) => problems.push({ loc: [...loc, ...path], msg }) };
}

/** The fields that open every stored form (tasks' and abstention tasks'): its id, its question type among `types`, its instructions. */
export function checkOpening(v: Record<string, any>, types: string[], bad: AddFormProblem) {
  if (typeof v.id !== 'string' || !TASK_ID.test(v.id)) bad(['id'], `must be a task id: ${TASK_ID_RULE}`);
  const quoted = types.map((t) => `"${t}"`);
  if (!types.includes(v.type)) bad(['type'], types.length === 2 ? `must be ${quoted.join(' or ')}` : `must be one of ${quoted.join(', ')}`);
  if (typeof v.instructions !== 'string') bad(['instructions'], 'must be a string');
}

/** The fields that close every stored form: what it was fitted under, and its record. */
export function checkProvenance(v: Record<string, any>, bad: AddFormProblem) {
  if (typeof v.fingerprint !== 'string') bad(['fingerprint'], 'must be a string');
  if (!isObject(v.record)) bad(['record'], 'must be an object');
}

/** Those fields as stored (an older or hand-written form may lack the components and the date). */
export function provenanceOf(v: Record<string, any>) {
  return {
    fingerprint: v.fingerprint as string,
    fingerprint_components: isObject(v.fingerprint_components) ? v.fingerprint_components : {},
    created_at: typeof v.created_at === 'string' ? v.created_at : new Date().toISOString(),
  };
}

/** A task in full form, checked field by field; `loc` prefixes the problems' locations. */
export function parseTask(v: unknown, loc: (string | number)[]): { task?: Task; problems: FormProblem[] } {
  const { problems, bad } = problemsAt(loc);
  if (!isObject(v)) return { problems: [{ loc, msg: 'must be an object (a task in the full form of GET /v1/tasks?full=1)' }] };
  checkOpening(v, ['noul', 'choice', 'score'], bad);
  const options = v.options;
  if (!Array.isArray(options) || options.length < 2 || options.length > MAX_OPTIONS) bad(['options'], `must be an array of 2 to ${MAX_OPTIONS} options`);
  else {
    options.forEach((o: any, j: number) => {
      if (!isObject(o) || typeof o.key !== 'string' || !(typeof o.description === 'string' || o.description === null)) bad(['options', j], 'must be {key: string, description: string or null}');
    });
    if (new Set(options.map((o: any) => o?.key)).size !== options.length) bad(['options'], 'must not repeat a key');
  }
  if (problems.length) return { problems };
  const keys: string[] = options.map((o: any) => o.key);
  const C = keys.length;
  if (v.match_key !== matchKeyOf(v.type, options)) bad(['match_key'], 'does not match the type and options');
  if (!['none', 'calibration', 'head'].includes(v.applied)) bad(['applied'], 'must be one of "none", "calibration", "head"');
  const cal = v.calibration;
  if (!isObject(cal) || !finite(cal.a) || !(cal.lambda === null || finite(cal.lambda)) || !isObject(cal.b)) bad(['calibration'], 'must be {a: number, b: {key: number}, lambda: number or null}');
  else if (Object.keys(cal.b).length !== C || keys.some((k) => !finite(cal.b[k]))) bad(['calibration', 'b'], `must give a finite number for each of the ${C} option keys, and no other`);
  let head: Task['head'] = null;
  if (v.head !== null) {
    const h = v.head;
    if (!isObject(h) || !['residual', 'replace'].includes(h.form) || !finite(h.lambda) || !Number.isInteger(h.d) || h.d < 1 || !isObject(h.W) || !Array.isArray(h.c)) {
      bad(['head'], 'must be null or {form: "residual"|"replace", lambda: number, d: integer, W: {dtype, shape, data, sha256}, c: number[]}');
    } else {
      const bytes = typeof h.W.data === 'string' ? Buffer.from(h.W.data, 'base64') : Buffer.alloc(0);
      if (bytes.length !== C * h.d * 4) bad(['head', 'W', 'data'], `must be base64 of ${C} x ${h.d} float32 values (${C * h.d * 4} bytes), got ${bytes.length} bytes`);
      else if (createHash('sha256').update(bytes).digest('hex') !== h.W.sha256) bad(['head', 'W', 'sha256'], 'does not match the data');
      else {
        const W = new Float32Array(C * h.d);
        for (let k = 0; k < W.length; k++) W[k] = bytes.readFloatLE(4 * k);
        if (!W.every(Number.isFinite)) bad(['head', 'W', 'data'], 'must hold finite numbers only');
        if (h.c.length !== C || !h.c.every(finite)) bad(['head', 'c'], `must be ${C} finite numbers`);
        head = { form: h.form as HeadForm, lambda: h.lambda, d: h.d, W, c: h.c };
      }
    }
  } else if (v.applied === 'head') bad(['head'], 'must be present when "applied" is "head"');
  checkProvenance(v, bad);
  if (problems.length) return { problems };
  const task: Task = {
    id: v.id,
    type: v.type,
    instructions: v.instructions,
    options: options.map((o: any) => ({ key: o.key, description: o.description })),
    match_key: v.match_key,
    applied: v.applied,
    calibration: { a: cal.a, b: Object.fromEntries(keys.map((k) => [k, cal.b[k]])), lambda: cal.lambda },
    head,
    // Its parts made to say what the task applies, and why a part is not applied (an older export may not).
    record: explainedParts(v.record, v.applied, head?.form),
    ...provenanceOf(v),
  };
  return { task, problems };
}
