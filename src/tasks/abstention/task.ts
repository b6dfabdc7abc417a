/**
 * An abstention task as it is stored, exported and applied (docs/abstention.md): a threshold
 * on the abstain option's probability for the questions with one option set.
 *   option {key: K}:      the request's own option K means "can't tell" (choice questions);
 *   option {append: T}:   the server appends an option T (key T, no description) to the question;
 *   match "option_set":   text questions whose options, without the abstain option, are the task's
 *                         (type, keys and descriptions, as tasks match; the wording is not compared);
 *   match "imajev_extension": the same, for requests that use the format's image extension (served
 *                         by the image engine); text questions never match it.
 */
import { QuestionType } from '../../rendering/profile';
import { QuestionOption, QuestionSpec } from '../../rendering/renderer';
import { questionOf, TaskOption } from '../task';
import { ThresholdRecord } from './fit';

export const MATCH_MODES = ['option_set', 'imajev_extension'] as const;
export type MatchMode = (typeof MATCH_MODES)[number];
export type AbstainOption = { key: string } | { append: string };

export interface AbstentionTask {
  id: string;
  type: Extract<QuestionType, 'choice' | 'noul'>;
  instructions: string;
  match: MatchMode;
  option: AbstainOption;
  /** The abstain option as the questions hold it: K with the examples' description of it, or {key: T, description: null}. */
  abstain_option: TaskOption;
  /** The option set without the abstain option, in canonical order, and its match key (as a task's). */
  options: TaskOption[];
  match_key: string;
  /** Abstain when P(abstain option) > threshold; null when none is applied. */
  threshold: number | null;
  applied: boolean;
  /** The task (QuestionTask.identity) applied when the examples were read; null: none. */
  fitted_with: string | null;
  record: ThresholdRecord & { examples_sha256: string; read_ms: number };
  fingerprint: string;
  fingerprint_components: Record<string, string>;
  created_at: string;
}

/** The abstain option's key: the request's own K, or the appended text. */
export function abstainKeyOf(option: AbstainOption): string {
  return 'key' in option ? option.key : option.append;
}

/**
 * The question as it is asked with its abstain option: the request's own (present), the appended
 * text added last, or undefined when a key-mode option is missing from the request (or the text
 * would be a yes/no question's own "true" or "false").
 */
export function withAbstainOption(spec: QuestionSpec, option: AbstainOption): QuestionSpec | undefined {
  const key = abstainKeyOf(option);
  if (spec.type === 'noul' && (key === 'true' || key === 'false')) return undefined; // yes or no themselves
  if (spec.options.some((o) => o.key === key)) return spec;
  if ('key' in option) return undefined;
  const appended: QuestionOption = { key, description: null };
  return { ...spec, options: [...spec.options, appended] };
}

/** The question's option set without its abstain option: type, canonical options and match key. */
export function optionSetOf(asked: QuestionSpec, abstainKey: string) {
  return questionOf({ ...asked, options: asked.options.filter((o) => o.key !== abstainKey) });
}

/** The match key of the question as asked (abstain option included): what a request that already holds it matches. */
export function askedMatchKey(t: AbstentionTask): string {
  return questionOf({ type: t.type, instructions: t.instructions, options: [...t.options, t.abstain_option] }).match_key;
}
