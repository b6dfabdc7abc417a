/** The worker thread that fits a task (fit-in-worker.ts starts it): fitting never runs on the server's event loop. */
import { parentPort } from 'worker_threads';
import { fitTask } from './fit/fit-task';
import { FitInput } from './fit/record';

parentPort!.once('message', (input: FitInput) => {
  try {
    parentPort!.postMessage({ ok: fitTask(input) });
  } catch (e) {
    parentPort!.postMessage({ error: e instanceof Error ? e.stack ?? e.message : String(e) });
  }
});
