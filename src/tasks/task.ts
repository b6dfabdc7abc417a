/**
 * A registered task as it is stored, exported and applied. The fitted numbers are
 * JSON-exact (float64 numbers) except the head's matrix, stored as float32 (base64): the
 * live task applies the same float32 values an exported and re-imported one does.
 */
import { createHash } from 'crypto';
import { compareCodePoints } from '../answering/answers';
import { QuestionType } from '../rendering/profile';
import { QuestionSpec } from '../rendering/renderer';
import { FitOutput } from './fit/record';
import { HeadForm } from './fit/head';

/** The stored and exported form's version: part of the fingerprint. */
export const TASKS_FORMAT = 'tqserve-tasks/1';

export interface TaskOption {
  key: string;
  description: string | null;
}

export interface Task {
  id: string;
  type: QuestionType;
  instructions: string;
  /** Options in canonical order: choice by key (code-point order), noul true/false, score by level. */
  options: TaskOption[];
  match_key: string;
  applied: FitOutput['applied'];
  calibration: { a: number; b: Record<string, number>; lambda: number | null };
  head: { form: HeadForm; lambda: number; d: number; W: Float32Array; c: number[] } | null;
  record: FitOutput['record'] & { examples_sha256: string; read_ms: number };
  fingerprint: string;
  /** The fingerprint's components when it was fitted: an import names those that differ. */
  fingerprint_components: Record<string, string>;
  created_at: string;
}

function canonicalOptions(spec: Pick<QuestionSpec, 'type' | 'options'>): TaskOption[] {
  const options = spec.options.map((o) => ({ key: o.key, description: o.description }));
  // Choice options match whatever order their keys arrive in; noul and score keep theirs (levels are ordered).
  if (spec.type === 'choice') options.sort((a, b) => compareCodePoints(a.key, b.key));
  return options;
}

/** `spec` with its options in the order a task reads them (canonicalOptions'). */
export function inTaskOrder(spec: QuestionSpec): QuestionSpec {
  if (spec.type !== 'choice') return spec;
  return { ...spec, options: [...spec.options].sort((a, b) => compareCodePoints(a.key, b.key)) };
}

/** What a task matches: the question's type and its option list (keys and rendered descriptions), not its wording. */
export function matchKeyOf(type: QuestionType, options: TaskOption[]): string {
  return createHash('sha256').update(JSON.stringify([type, options.map((o) => [o.key, o.description])])).digest('hex').slice(0, 32);
}

export function questionOf(spec: QuestionSpec): { type: QuestionType; instructions: string; options: TaskOption[]; match_key: string } {
  const options = canonicalOptions(spec);
  return { type: spec.type, instructions: spec.instructions, options, match_key: matchKeyOf(spec.type, options) };
}

export function taskFromFit(
  id: string,
  question: ReturnType<typeof questionOf>,
  fit: FitOutput,
  extra: { examples_sha256: string; read_ms: number; fingerprint: { hash: string; components: Record<string, string> } },
): Task {
  const keys = question.options.map((o) => o.key);
  return {
    id,
    ...question,
    applied: fit.applied,
    calibration: { a: fit.calibration.a, b: Object.fromEntries(keys.map((k, j) => [k, fit.calibration.b[j]])), lambda: fit.calibration.lambda },
    head: fit.head && { form: fit.head.form, lambda: fit.head.lambda, d: fit.head.d, W: fit.head.W, c: Array.from(fit.head.c) },
    record: { ...fit.record, examples_sha256: extra.examples_sha256, read_ms: extra.read_ms },
    fingerprint: extra.fingerprint.hash,
    fingerprint_components: extra.fingerprint.components,
    created_at: new Date().toISOString(),
  };
}

/** A task and its fit, as an abstention threshold records what it was fitted on: the id, the examples' hash and what is applied. */
export function taskIdentity(t: Task): string {
  return `${t.id}@${t.record.examples_sha256.slice(0, 16)}:${t.applied}`;
}
