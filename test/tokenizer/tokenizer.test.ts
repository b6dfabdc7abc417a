/** The checkpoint's own tokenizer.json and chat template, from the real npm tokenizers. */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
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

test('a text tokenized again comes from the encoding cache: the same ids, one array shared by every ask', async () => {
  const tok = await ModelTokenizer.load(tinyModel('tiny-qwen3'));
  const text = 'The shipment left Rotterdam on Tuesday. '.repeat(50);
  const first = await tok.encode(text);
  const again = await tok.encode(text);
  expect(again).toEqual(first);
  expect(await tok.encode(text)).toBe(again);
  // Not frozen: V8 copies a frozen array into the engine call's Int32Array element by element (bench/README.md, "Front end").
  expect(Object.isFrozen(again)).toBe(false);
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

// The bound is kept between starts ($XDG_CACHE_HOME/tqserve/token-bounds.json): read back without a worker, computed
// again when the file changes.
test("the bytes-per-token bound is kept on disk, and computed again for a changed tokenizer.json", async () => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-bound-'));
  const saved = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = path.join(scratch, 'cache');
  try {
    const folder = path.join(scratch, 'tok');
    fs.mkdirSync(folder);
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) fs.copyFileSync(path.join(tinyModel('tiny-mistral'), f), path.join(folder, f));
    const computed = (await ModelTokenizer.load(folder)).maxBytesPerToken;
    expect(computed).toBeGreaterThan(0);
    const cache = path.join(scratch, 'cache', 'tqserve', 'token-bounds.json');
    const kept = JSON.parse(fs.readFileSync(cache, 'utf8'));
    expect(Object.values(kept)).toEqual([computed]);
    // A kept value is what a load reads: changed in the file, it is the one given.
    fs.writeFileSync(cache, JSON.stringify(Object.fromEntries(Object.keys(kept).map((k) => [k, 1234]))));
    expect((await ModelTokenizer.load(folder)).maxBytesPerToken).toBe(1234);
    // The tokenizer.json touched: another key, computed again.
    const later = new Date(Date.now() + 60_000);
    fs.utimesSync(path.join(folder, 'tokenizer.json'), later, later);
    expect((await ModelTokenizer.load(folder)).maxBytesPerToken).toBe(computed);
    expect(Object.keys(JSON.parse(fs.readFileSync(cache, 'utf8')))).toHaveLength(2);
  } finally {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = saved;
    fs.rmSync(scratch, { recursive: true, force: true });
  }
});

// In a process of its own each (what a load leaves resident is the process's): Qwen3's tokenizer.json loaded by the
// library alone, and by ModelTokenizer.load, which gives the pages the native load freed back (src/tokenizer/tokenizer.ts).
test("a tokenizer's load leaves the memory it freed with the system: the process tens of MB smaller than after the library's own load", async () => {
  const rssAfter = (load: string) => {
    const script = `const load = async () => { ${load} };
      load().then(() => { process.stdout.write(String(process.memoryUsage().rss)); process.exit(0); });`;
    return Number(execFileSync(process.execPath, ['-e', script], { cwd: path.resolve(__dirname, '..', '..'), encoding: 'utf8' }));
  };
  const file = path.join(tinyModel('tiny-qwen3'), 'tokenizer.json');
  await ModelTokenizer.load(path.dirname(file)); // its bytes-per-token bound kept on disk: no worker parses the file in the child
  const library = rssAfter(`require('tokenizers').Tokenizer.fromFile(${JSON.stringify(file)});`);
  const ours = rssAfter(`await require('./dist/tokenizer/tokenizer').ModelTokenizer.load(${JSON.stringify(path.dirname(file))});`);
  expect(library - ours).toBeGreaterThan(25 << 20);
});
