/** Task examples for tests and benchmarks: the keyword task (12 options, the answer named in the state) and a class-prior task. */
import { uniformStream } from '../../src/common/prng';

export const codeWords = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet', 'kilo', 'lima'];
const filler = ['river', 'window', 'paper', 'stone', 'garden', 'music', 'winter', 'bridge', 'silver', 'forest', 'candle', 'market'];

export function keywordQuestion(words = codeWords) {
  return { type: 'choice', instructions: 'Which code word does the note name?', criteria: Object.fromEntries(words.map((k) => [k, null])) };
}

/** A state naming `word` among `fillerWords` random filler words (seeded by `i`; the text holds no index, so that held-out states come from the same distribution). */
export function keywordState(word: string, i: number, fillerWords = 4): string {
  const u = uniformStream(1000 + i);
  const words = Array.from({ length: fillerWords }, () => filler[Math.floor(u() * filler.length)]);
  words.splice(Math.floor(u() * (fillerWords + 1)), 0, word);
  return `Note: ${words.join(' ')}.`;
}

export function keywordExamples(n: number, offset = 0, words = codeWords, fillerWords = 4) {
  return Array.from({ length: n }, (_, j) => {
    const i = j + offset, word = words[i % words.length];
    return { request: { state: keywordState(word, i, fillerWords), questions: { q: keywordQuestion(words) } }, answer: word };
  });
}

export const priorQuestion = { type: 'choice', instructions: 'Which department should handle it?', criteria: { billing: 'money matters', shipping: 'parcels', support: 'help', sales: 'new orders' } };

/** Labels 70/10/10/10 drawn independently of the (random) text. */
export function priorExamples(n: number, seed = 5) {
  const u = uniformStream(seed);
  return Array.from({ length: n }, (_, i) => {
    const v = u();
    const answer = v < 0.7 ? 'billing' : v < 0.8 ? 'shipping' : v < 0.9 ? 'support' : 'sales';
    return { request: { state: `Ticket ${i}: ${Math.floor(u() * 1e6).toString(36)} ${Math.floor(u() * 1e6).toString(36)}`, questions: { d: priorQuestion } }, answer };
  });
}

/** The parts of a task's record that are not applied and do not say why (docs/tasks.md, "The record"): none, always. */
export function unexplainedParts(task: { id: string; record: Record<string, any> }): string[] {
  return ['calibration', 'head'].filter((part) => !task.record[part].applied && !(typeof task.record[part].reason === 'string' && task.record[part].reason)).map((part) => `${task.id}.${part}`);
}
