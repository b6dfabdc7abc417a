/**
 * Fits a task in a worker thread of its own, so that /v1/systemone keeps answering while a
 * registration fits (a fit of 1,000 examples with 77 options takes seconds to minutes).
 * Under ts-node (npm start, the tests) the worker loads its TypeScript the same way.
 */
import * as path from 'path';
import { Worker } from 'worker_threads';
import { FitInput, FitOutput } from './fit/fit-task';

export function fitInWorker(input: FitInput): Promise<FitOutput> {
  const typescript = __filename.endsWith('.ts');
  const worker = new Worker(path.join(__dirname, `fit-worker.${typescript ? 'ts' : 'js'}`), {
    execArgv: typescript ? ['-r', 'ts-node/register/transpile-only'] : [],
  });
  return new Promise<FitOutput>((resolve, reject) => {
    worker.once('message', (m: { ok?: FitOutput; error?: string }) => (m.ok ? resolve(m.ok) : reject(new Error(`task fitting failed: ${m.error}`))));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`task fitting worker exited with code ${code}`)));
    worker.postMessage(input);
  }).finally(() => worker.terminate());
}
