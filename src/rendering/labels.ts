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

/** The last of `ids` where `ids` is `base` and one token more; undefined otherwise. */
function oneTokenMore(base: readonly number[], ids: readonly number[]): number | undefined {
  if (ids.length !== base.length + 1 || base.some((id, i) => ids[i] !== id)) return undefined;
  return ids[ids.length - 1];
}

/**
 * The token id of `label` right after `context`, or undefined when it is not
 * exactly one token there. `spaced`: the label follows a space (cue position).
 */
export async function tokenInContext(tok: ModelTokenizer, context: string, label: string, spaced: boolean): Promise<number | undefined> {
  return oneTokenMore(await tok.encode(context), await tok.encode(context + (spaced ? ' ' : '') + label));
}

/**
 * Candidates go to the tokenizer this many at a time, in one call: a call per candidate, each a round trip to the
 * library's thread pool, took about three times the tokenizing itself (bench/README.md, "Where a start's time
 * goes"); a few calls of this size find a vocabulary's 255 labels.
 */
const CANDIDATES_PER_CALL = 128;

/**
 * Single-token labels after one context, each candidate tokenized once: a renderer's letter and digit sets share
 * all their letters.
 */
export class LabelsInContext {
  private readonly known = new Map<string, number | undefined>();
  private base?: readonly number[];

  constructor(private readonly tok: ModelTokenizer, private readonly context: string, private readonly spaced: boolean) {}

  /** Up to `limit` distinct single-token labels from `candidates`, in order. */
  async find(candidates: string[], limit = MAX_OPTIONS): Promise<LabelSet> {
    const set: LabelSet = { texts: [], ids: [] };
    const seen = new Set<number>();
    for (let from = 0; from < candidates.length && set.texts.length < limit; from += CANDIDATES_PER_CALL) {
      const chunk = candidates.slice(from, from + CANDIDATES_PER_CALL);
      await this.learn(chunk);
      for (const c of chunk) {
        if (set.texts.length >= limit) break;
        const id = this.known.get(c);
        if (id === undefined || seen.has(id)) continue;
        seen.add(id);
        set.texts.push(c);
        set.ids.push(id);
      }
    }
    return set;
  }

  private async learn(candidates: string[]): Promise<void> {
    const unknown = candidates.filter((c) => !this.known.has(c));
    if (unknown.length === 0) return;
    this.base ??= await this.tok.encode(this.context);
    const encoded = await this.tok.encodeEach(unknown.map((c) => this.context + (this.spaced ? ' ' : '') + c));
    unknown.forEach((c, i) => this.known.set(c, oneTokenMore(this.base!, encoded[i])));
  }
}
