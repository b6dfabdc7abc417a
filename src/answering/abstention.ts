/**
 * The abstention extension's answer math (docs/abstention.md). A question with an abstain
 * option is answered from the distribution over all its options, the abstain option included
 * (after any task): u = P(abstain option) is `unknown_probability`, and
 *   - with a fitted threshold τ (an abstention task, --abstention on): abstain when u > τ;
 *   - otherwise, the default rule: abstain when u exceeds every other option's probability.
 * The reported probabilities are the same whichever rule decides: over the request's own keys,
 * so an appended option's share is divided out (p_k / Σ_own p_j) and the request's own abstain
 * key keeps its probability. `choice` is the best option other than the abstain option, unless
 * the server abstains on a question whose abstain option is the request's own key: then that key.
 */
import { ChoiceAnswer, choiceAnswer, NoulAnswer, uniformRescaled } from './answers';
import { QuestionAbstention } from './context';

export interface AbstentionResult {
  key: string;
  appended: boolean;
  /** P(abstain option) in the distribution answered with. */
  unknown: number;
  abstained: boolean;
  /** The abstention task whose threshold decided; undefined: the default rule did. */
  task?: string;
}

export function decideAbstention(a: QuestionAbstention, p: Map<string, number>, appliedTask: string | null): AbstentionResult {
  const unknown = p.get(a.key)!;
  const threshold = a.threshold && a.threshold.fittedWith === appliedTask ? a.threshold : undefined;
  let abstained: boolean;
  if (threshold) abstained = unknown > threshold.value;
  else abstained = [...p].every(([k, v]) => k === a.key || unknown > v);
  return { key: a.key, appended: a.appended, unknown, abstained, task: threshold?.task };
}

/** The probabilities reported over the request's own keys: an appended option's share divided out. */
export function reportedProbabilities(keys: string[], p: Map<string, number>, a: AbstentionResult): Map<string, number> {
  if (!a.appended) return p;
  const own = keys.reduce((s, k) => s + p.get(k)!, 0);
  return new Map(keys.map((k) => [k, p.get(k)! / own]));
}

export type AbstainingChoice = ChoiceAnswer & { unknown_probability: number; abstained: boolean };
export type AbstainingNoul = NoulAnswer & { unknown_probability: number; abstained: boolean };

/** `keys`: the request's own; `reported`: reportedProbabilities'. */
export function abstainingChoice(keys: string[], reported: Map<string, number>, a: AbstentionResult): AbstainingChoice {
  const best = choiceAnswer(keys.filter((k) => k !== a.key), reported).choice;
  const choice = a.abstained && !a.appended ? a.key : best;
  const answer = choiceAnswer(keys, reported);
  return { ...answer, choice, confidence: uniformRescaled(reported.get(choice)!, keys.length), unknown_probability: a.unknown, abstained: a.abstained };
}

export function abstainingNoul(reported: Map<string, number>, a: AbstentionResult): AbstainingNoul {
  return { type: 'noul', noul: reported.get('true')!, unknown_probability: a.unknown, abstained: a.abstained };
}
