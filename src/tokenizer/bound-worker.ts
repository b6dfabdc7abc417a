/**
 * The worker thread that reads a tokenizer.json for its bytes-per-token bound (token-bound.ts): parsing the
 * JSON takes as long as a third of the native tokenizer's own load of the same file (a 151k-token vocabulary
 * and its merges), so ModelTokenizer.load runs it here, beside that load, rather than after it.
 */
import * as fs from 'fs';
import { parentPort, workerData } from 'worker_threads';
import { maxBytesPerToken } from './token-bound';

try {
  parentPort!.postMessage({ bound: maxBytesPerToken(JSON.parse(fs.readFileSync(workerData as string, 'utf8'))) ?? null });
} catch (e) {
  parentPort!.postMessage({ error: e instanceof Error ? e.message : String(e) });
}
