/**
 * Tasks between the readout and the answer (the pipeline's task step, answering/context.ts TaskLookup): a question
 * whose type and option list match a task is answered with the task's distribution,
 *   z_j = a * log p_j + b_j  [+ W h + c for a head; a head of form "replace": W h + c alone],
 * p the baseline distribution (the readout's, tempered, averaged over the orders asked),
 * h the hidden state at the readout position (the question asked in the task's option order).
 */
import { QuestionTask, TaskLookup } from '../answering/context';
import { QuestionSpec } from '../rendering/renderer';
import { safeLog, softmaxInto } from './fit/softmax-model';
import { inTaskOrder, questionOf, Task, taskIdentity } from './task';

/** The distribution of a task that applies (`applied` is not "none"); undefined without the hidden state its head needs. */
function taskDistribution(task: Task, baseline: Map<string, number>, hidden?: ArrayLike<number>): Map<string, number> | undefined {
  const keys = task.options.map((o) => o.key);
  const C = keys.length;
  const z = new Float64Array(C);
  const head = task.applied === 'head' ? task.head : null;
  if (head && (!hidden || hidden.length !== head.d)) return undefined;
  keys.forEach((k, j) => {
    z[j] = head?.form === 'replace' ? 0 : task.calibration.a * safeLog(baseline.get(k) ?? 0) + task.calibration.b[k];
    if (head) {
      let s = head.c[j];
      for (let k2 = 0; k2 < head.d; k2++) s += head.W[j * head.d + k2] * hidden![k2];
      z[j] += s;
    }
  });
  const p = new Float64Array(C);
  softmaxInto(z, p);
  return new Map(keys.map((k, j) => [k, p[j]]));
}

/** The registered tasks by match key, applied while `enabled` (--tasks). */
export class TaskBook implements TaskLookup {
  private byMatch = new Map<string, Task>();

  constructor(public enabled: boolean) {}

  set(tasks: Iterable<Task>) {
    this.byMatch = new Map([...tasks].map((t) => [t.match_key, t]));
  }

  taskFor(spec: QuestionSpec): QuestionTask | undefined {
    const task = this.enabled && this.byMatch.size ? this.byMatch.get(questionOf(spec).match_key) : undefined;
    if (!task || task.applied === 'none') return undefined;
    return { id: task.id, identity: taskIdentity(task), asked: inTaskOrder(spec), wantsHidden: task.applied === 'head', apply: (baseline, hidden) => taskDistribution(task, baseline, hidden) };
  }
}
