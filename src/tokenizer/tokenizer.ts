/**
 * Tokenization from a checkpoint's own tokenizer.json (HF `tokenizers`, native)
 * and chat templates from its tokenizer_config.json (@huggingface/jinja).
 */
import * as fs from 'fs';
import * as path from 'path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from 'tokenizers';
import { Worker } from 'worker_threads';
import { hostAddon } from '../common/host-addon';
import { siblingModule } from '../common/sibling-module';
import { keepBound, keptBound } from './bound-cache';
import { EncodingCache } from './encoding-cache';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

interface TokenizerConfig {
  chat_template?: string | { name: string; template: string }[];
  bos_token?: string | { content: string } | null;
  eos_token?: string | { content: string } | null;
  add_bos_token?: boolean;
}

function tokenText(t: TokenizerConfig['bos_token']): string | undefined {
  if (t == null) return undefined;
  return typeof t === 'string' ? t : t.content;
}

/** What the encoding cache may hold: about 1,400 states of 5,000 characters with their ids. */
export const encodingCacheBytes = 32 << 20;

/** maxBytesPerToken of a tokenizer.json: kept from an earlier start (bound-cache.ts), else computed and kept. */
async function boundOf(file: string): Promise<number | undefined> {
  const kept = keptBound(file);
  if (kept.found) return kept.bound;
  const bound = await computedBound(file);
  keepBound(kept.key, bound);
  return bound;
}

/** maxBytesPerToken of a tokenizer.json, read and parsed in a worker thread. */
function computedBound(file: string): Promise<number | undefined> {
  const worker = siblingModule(__filename, 'bound-worker');
  return new Promise((resolve, reject) => {
    new Worker(worker.file, { execArgv: worker.execArgv, workerData: file })
      .once('message', (m: { bound?: number | null; error?: string }) => (m.error === undefined ? resolve(m.bound ?? undefined) : reject(new Error(`${file}: ${m.error}`))))
      .once('error', reject);
  });
}

/**
 * From the first tokenizer's load on, the process's C heap gives blocks up to 32 MiB itself, as the engine process's
 * does (csrc/engine/host_allocator.cpp), rather than mapping each on its own; and the pages the load freed go back to
 * the system after it. The native load builds a vocabulary's and merges' strings in hash tables grown by doubling:
 * each block mapped on its own was faulted in page by page, zeroed, and unmapped at the next growth (bench/README.md,
 * "Where a start's CPU goes"). glibc's own threshold rises to that bound as large blocks are freed; here it starts there.
 */
const HEAP_BLOCKS_UP_TO = 32 << 20;

/**
 * The library's ids as an array of small integers, as V8 holds them unboxed. Its own arrays hold each id as a boxed
 * number (V8's HOLEY_ELEMENTS), and every copy a request makes of a state's ids paid for it: into the Int32Array that
 * crosses to the engine process, an order of magnitude slower a state (bench/README.md, "Front end").
 */
function smallIntegers(ids: number[]): number[] {
  return ids.map((id) => id | 0);
}

function nativeTokenizer(file: string): Tokenizer {
  const addon = hostAddon();
  addon?.setMmapThreshold(HEAP_BLOCKS_UP_TO);
  const tokenizer = Tokenizer.fromFile(file);
  addon?.releaseFreeMemory();
  return tokenizer;
}

export class ModelTokenizer {
  private readonly template?: Template;
  private readonly encodings = new EncodingCache(encodingCacheBytes);

  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly config: TokenizerConfig,
    readonly folder: string,
    /** The most input bytes one token stands for, when a sound bound exists (token-bound.ts). */
    readonly maxBytesPerToken: number | undefined,
  ) {
    const tpl = config.chat_template;
    const source = Array.isArray(tpl) ? tpl.find((t) => t.name === 'default')?.template ?? tpl[0]?.template : tpl;
    if (source) this.template = new Template(source);
  }

  /** The checkpoint's tokenizer; its bytes-per-token bound is read in a worker thread meanwhile (bound-worker.ts). */
  static async load(folder: string): Promise<ModelTokenizer> {
    const file = path.join(folder, 'tokenizer.json');
    if (!fs.existsSync(file)) throw new Error(`${file}: missing (the checkpoint folder needs its tokenizer.json)`);
    const bound = boundOf(file);
    bound.catch(() => undefined); // awaited below, unless the tokenizer's own load fails first (its error is the one to tell)
    const cfgFile = path.join(folder, 'tokenizer_config.json');
    const config: TokenizerConfig = fs.existsSync(cfgFile) ? JSON.parse(fs.readFileSync(cfgFile, 'utf8')) : {};
    return new ModelTokenizer(nativeTokenizer(file), config, folder, await bound);
  }

  get hasChatTemplate(): boolean {
    return this.template !== undefined;
  }

  get bosToken(): string | undefined {
    return tokenText(this.config.bos_token);
  }

  get eosToken(): string | undefined {
    return tokenText(this.config.eos_token);
  }

  vocabSize(): number {
    return this.tokenizer.getVocabSize(true);
  }

  /**
   * Token ids of `text`; special tokens written in the text are recognised, none are added. Kept
   * for the next request of the same `cacheSalt` (none: unsalted requests): a hit across tenants
   * would show, by its time, that another tenant sent the text.
   */
  async encode(text: string, cacheSalt?: string): Promise<readonly number[]> {
    // One key per (salt, text), no two alike: unsalted keys start with a space, salted ones with the salt's length.
    const key = cacheSalt === undefined ? ` ${text}` : `${cacheSalt.length} ${cacheSalt}${text}`;
    const held = this.encodings.get(key);
    if (held) return held;
    const ids = smallIntegers((await this.tokenizer.encode(text, null, { addSpecialTokens: false })).getIds());
    this.encodings.set(key, ids);
    return ids;
  }

  /** Token ids of each text, as encode gives them, in one call to the library; none is kept. */
  async encodeEach(texts: string[]): Promise<number[][]> {
    const encodings = await this.tokenizer.encodeBatch(texts, { addSpecialTokens: false });
    return encodings.map((e) => smallIntegers(e.getIds()));
  }

  /** Texts whose tokens are kept (one entry per salt and text). */
  get encodingsKept(): number {
    return this.encodings.size;
  }

  async decode(ids: readonly number[]): Promise<string> {
    return this.tokenizer.decode([...ids], false);
  }

  tokenToId(token: string): number | undefined {
    return this.tokenizer.tokenToId(token) ?? undefined;
  }

  idToToken(id: number): string | undefined {
    return this.tokenizer.idToToken(id) ?? undefined;
  }

  /**
   * Renders messages with the checkpoint's chat template. `enable_thinking` is
   * false: answers are read at once, so Qwen3's template closes an empty think block.
   */
  applyChatTemplate(messages: ChatMessage[], addGenerationPrompt = true): string {
    if (!this.template) throw new Error(`${this.folder}: tokenizer_config.json has no chat_template`);
    return this.template.render({
      messages,
      add_generation_prompt: addGenerationPrompt,
      enable_thinking: false,
      bos_token: this.bosToken ?? '',
      eos_token: this.eosToken ?? '',
    });
  }
}
