/**
 * Abstention examples for tests and benchmarks. The keyword question (test/helpers/tasks.ts) asked
 * about notes that name a code word (answerable) or hold the marker "[blank]" in place of one
 * (unanswerable). A head task on the question with the abstain option among its options learns
 * to read the marker from the hidden state: its labels for blank notes say "can't tell" only
 * `blankLabelShare` of the time and "alpha" otherwise (annotators who guessed), so the abstain
 * option is seldom the most probable on a blank note and a fitted threshold beats the default rule.
 */
import { uniformStream } from '../../src/common/prng';
import { codeWords, keywordQuestion, keywordState } from './tasks';

export const CANT_TELL = "can't tell";

/** The keyword question, with extra options (keys without descriptions) after the code words. */
export function codeQuestion(extra: string[] = []) {
  return keywordQuestion([...codeWords, ...extra]);
}

export function blankState(i: number, fillerWords = 4): string {
  return keywordState('[blank]', i, fillerWords);
}

/** Head-task examples on the question with "can't tell" among its options. */
export function blankHeadExamples(answerable: number, blank: number, blankLabelShare = 0.3, seed = 9) {
  const u = uniformStream(seed);
  const question = codeQuestion([CANT_TELL]);
  return [
    ...Array.from({ length: answerable }, (_, i) => ({ request: { state: keywordState(codeWords[i % 12], i), questions: { q: question } }, answer: codeWords[i % 12] })),
    ...Array.from({ length: blank }, (_, i) => ({ request: { state: blankState(500 + i), questions: { q: question } }, answer: u() < blankLabelShare ? CANT_TELL : 'alpha' })),
  ];
}

/**
 * Abstention-task examples: `answerable` notes naming a code word, `blank` blank notes (answer null),
 * from `offset` on (fresh states). `extra`: options the requests carry beyond the code words.
 */
export function blankAbstentionExamples(answerable: number, blank: number, offset = 2000, extra: string[] = []) {
  const question = codeQuestion(extra);
  return [
    ...Array.from({ length: answerable }, (_, i) => ({ request: { state: keywordState(codeWords[i % 12], offset + i), questions: { q: question } }, answer: codeWords[i % 12] as string | null })),
    ...Array.from({ length: blank }, (_, i) => ({ request: { state: blankState(offset + 1000 + i), questions: { q: question } }, answer: null as string | null })),
  ];
}

/** Examples whose answerability is independent of the text: a random half labelled null, the rest a random code word. */
export function randomNullExamples(n: number, seed = 3, question: object = codeQuestion()) {
  const u = uniformStream(seed);
  return Array.from({ length: n }, (_, i) => ({
    request: { state: `Note ${i}: ${Math.floor(u() * 1e9).toString(36)} ${Math.floor(u() * 1e9).toString(36)}.`, questions: { q: question } },
    answer: u() < 0.5 ? null : codeWords[Math.floor(u() * 12)],
  }));
}
