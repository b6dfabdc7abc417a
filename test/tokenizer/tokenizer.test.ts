/** The checkpoint's own tokenizer.json and chat template, from the real npm tokenizers. */
import { EncodingCache } from '../../src/tokenizer/encoding-cache';
import { ModelTokenizer } from '../../src/tokenizer/tokenizer';
import { tinyModel } from '../helpers/models';

test('Qwen3: ChatML template renders (thinking off: an empty think block), and its special tokens encode as single ids', async () => {
  const tok = await ModelTokenizer.load(tinyModel('tiny-qwen3'));
  expect(tok.hasChatTemplate).toBe(true);
  const text = tok.applyChatTemplate([{ role: 'user', content: 'Is it blue?' }]);
  expect(text).toBe('<|im_start|>user\nIs it blue?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  const ids = await tok.encode(text);
  expect(ids[0]).toBe(tok.tokenToId('<|im_start|>'));
  expect(ids).toContain(tok.tokenToId('<|im_end|>'));
  expect(await tok.decode(ids)).toBe(text);
});

test('Llama 3: template adds the begin-of-text token once; encode adds none itself', async () => {
  const tok = await ModelTokenizer.load(tinyModel('tiny-llama'));
  const text = tok.applyChatTemplate([{ role: 'user', content: 'Hello' }]);
  expect(text.startsWith('<|begin_of_text|>')).toBe(true);
  const ids = await tok.encode(text);
  expect(ids.filter((i) => i === 128000)).toHaveLength(1);
  expect(await tok.encode('Hello')).not.toContain(128000);
});

test('Mistral (SentencePiece): no chat template; " A" after "Answer:" is the one token ▁A', async () => {
  const tok = await ModelTokenizer.load(tinyModel('tiny-mistral'));
  expect(tok.hasChatTemplate).toBe(false);
  expect(() => tok.applyChatTemplate([{ role: 'user', content: 'x' }])).toThrow(/no chat_template/);
  const ids = await tok.encode('Answer: A');
  expect(tok.idToToken(ids[ids.length - 1])).toBe('▁A');
  expect(tok.vocabSize()).toBe(32000);
});

test('a folder without tokenizer.json is reported by name', async () => {
  await expect(ModelTokenizer.load('/nonexistent')).rejects.toThrow('/nonexistent/tokenizer.json: missing');
});

test('a text tokenized again comes from the encoding cache: the same ids, as a copy its caller may change', async () => {
  const tok = await ModelTokenizer.load(tinyModel('tiny-qwen3'));
  const text = 'The shipment left Rotterdam on Tuesday. '.repeat(50);
  const first = await tok.encode(text);
  const again = await tok.encode(text);
  expect(again).toEqual(first);
  expect(again).not.toBe(first);
  again.fill(0);
  first.fill(0);
  expect(await tok.encode(text)).toEqual(await (await ModelTokenizer.load(tinyModel('tiny-qwen3'))).encode(text));
});

test('salted texts are kept apart: one entry per salt and text, the same ids, and no text reaches another salt\'s entry', async () => {
  const tok = await ModelTokenizer.load(tinyModel('tiny-qwen3'));
  const text = 'Invoice 42 for the Lyon depot. '.repeat(20);
  const plain = await tok.encode(text);
  expect(tok.encodingsKept).toBe(1);
  expect(await tok.encode(text, 'tenant-a')).toEqual(plain);
  expect(await tok.encode(text, 'tenant-b')).toEqual(plain);
  expect(await tok.encode(text, 'tenant-a')).toEqual(plain);
  expect(tok.encodingsKept).toBe(3);
  // An unsalted text spelling a salted entry's key, and a salt/text split moved by one character, are texts of their own.
  const fresh = await ModelTokenizer.load(tinyModel('tiny-qwen3'));
  expect(await tok.encode(`8 tenant-a${text}`)).toEqual(await fresh.encode(`8 tenant-a${text}`));
  expect(await tok.encode(`a${text}`, 'tenant-')).toEqual(await fresh.encode(`a${text}`));
  expect(tok.encodingsKept).toBe(5);
});

test('the encoding cache drops the least recently used texts to stay within its budget', () => {
  const ids = [1, 2, 3];
  const each = EncodingCache.cost('aaaa', ids);
  const cache = new EncodingCache(3 * each);
  for (const text of ['aaaa', 'bbbb', 'cccc']) cache.set(text, ids);
  expect(cache.get('aaaa')).toEqual(ids);  // now the most recently used
  cache.set('dddd', ids);
  expect(cache.get('bbbb')).toBeUndefined();
  expect(['aaaa', 'cccc', 'dddd'].map((t) => cache.get(t))).toEqual([ids, ids, ids]);
  expect(cache.heldBytes).toBe(3 * each);
  cache.set('x'.repeat(4 * each), ids);  // larger than the whole budget: not held
  expect(cache.size).toBe(3);
});
