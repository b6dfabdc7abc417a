/**
 * The bytes-per-token bound of a tokenizer.json (token-bound.ts), kept on disk between starts, beside the kernel
 * levels' cache ($XDG_CACHE_HOME/tqserve, else ~/.cache/tqserve): computing it parses the whole file in a worker, a
 * third busy thread while the engine and the tokenizer load (bench/README.md, "Set-up and suite time"). Keyed by the
 * file's real path, size and modification time, and by the code that computes the bound. A cache that cannot be read
 * or written is computed around, never an error.
 */
import { createHash } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';

/** A file's entry: its bound, or null where no sound bound exists. */
type Bounds = Record<string, number | null>;

function cacheFile(): string | undefined {
  const base = process.env.XDG_CACHE_HOME || (process.env.HOME ? path.join(process.env.HOME, '.cache') : undefined);
  return base && path.join(base, 'tqserve', 'token-bounds.json');
}

function readBounds(file: string): Bounds {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return {};
  }
}

let codeVersion: string | undefined;

/** The cache's key for a tokenizer.json, and its kept bound when there is one. */
export function keptBound(tokenizerJson: string): { key: string; found: boolean; bound?: number } {
  const st = fs.statSync(tokenizerJson);
  codeVersion ??= createHash('sha256').update(fs.readFileSync(require.resolve('./token-bound'))).digest('hex').slice(0, 16);
  const key = `${fs.realpathSync(tokenizerJson)}|${st.size}|${st.mtimeMs}|${codeVersion}`;
  const file = cacheFile();
  const bounds = file ? readBounds(file) : {};
  if (!Object.prototype.hasOwnProperty.call(bounds, key)) return { key, found: false };
  return { key, found: true, bound: bounds[key] ?? undefined };
}

/** Keeps a computed bound (written whole under another name, then renamed: a reader never sees half a file). */
export function keepBound(key: string, bound: number | undefined): void {
  const file = cacheFile();
  if (!file) return;
  try {
    // Made a level at a time, as the kernel levels' cache is: a recursive mkdir under a path that can hold no folder
    // (one in /proc) never returns in Node 20.
    for (const dir of [path.dirname(path.dirname(file)), path.dirname(file)]) if (!fs.existsSync(dir)) fs.mkdirSync(dir);
    const bounds = { ...readBounds(file), [key]: bound ?? null };
    const partial = `${file}.${process.pid}`;
    fs.writeFileSync(partial, JSON.stringify(bounds));
    fs.renameSync(partial, file);
  } catch {
    // computed again at the next start
  }
}
