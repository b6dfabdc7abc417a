/**
 * Option labels that are exactly one token *in context*: the token the model
 * would produce right after the prompt's readout position. A label is checked
 * by tokenizing the context ending plus the label and comparing with the
 * context alone, so " A" after "Answer:" and "A" after a newline are told apart.
 */
import { ModelTokenizer } from '../tokenizer/tokenizer';

export const MAX_OPTIONS = 255;

export interface LabelSet {
  /** Label texts as shown in the prompt ("A", "B", ...). */
  texts: string[];
  /** Their token ids at the readout position. */
  ids: number[];
}

const upper = Array.from({ length: 26 }, (_, i) => String.fromCharCode(65 + i));
const lower = upper.map((c) => c.toLowerCase());
const digits = Array.from({ length: 10 }, (_, i) => String(i));

/** Candidates in display order: A-Z, then AA..ZZ, then a-z, aa..zz. */
export const letterCandidates = [...upper, ...upper.flatMap((a) => upper.map((b) => a + b)), ...lower, ...lower.flatMap((a) => lower.map((b) => a + b))];
export const digitCandidates = [...digits, ...letterCandidates];

/**
 * The token id of `label` right after `context`, or undefined when it is not
 * exactly one token there. `spaced`: the label follows a space (cue position).
 */
export async function tokenInContext(tok: ModelTokenizer, context: string, label: string, spaced: boolean): Promise<number | undefined> {
  const base = await tok.encode(context);
  const ids = await tok.encode(context + (spaced ? ' ' : '') + label);
  if (ids.length !== base.length + 1 || base.some((id, i) => ids[i] !== id)) return undefined;
  return ids[ids.length - 1];
}

/** Up to `limit` distinct single-token labels from `candidates`, in order. */
export async function findLabels(tok: ModelTokenizer, context: string, candidates: string[], spaced: boolean, limit = MAX_OPTIONS): Promise<LabelSet> {
  const set: LabelSet = { texts: [], ids: [] };
  const seen = new Set<number>();
  for (const c of candidates) {
    if (set.texts.length >= limit) break;
    const id = await tokenInContext(tok, context, c, spaced);
    if (id === undefined || seen.has(id)) continue;
    seen.add(id);
    set.texts.push(c);
    set.ids.push(id);
  }
  return set;
}
