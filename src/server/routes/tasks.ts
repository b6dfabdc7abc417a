/** POST/GET /v1/tasks, DELETE /v1/tasks/{id}, POST /v1/tasks/import (tasks and abstention tasks) (docs/tasks.md). */
import Router from '@koa/router';
import { parseAbstentionTask } from '../../tasks/abstention/form';
import { exportForm, FormProblem, parseTask, summaryOf } from '../../tasks/export';
import { ExampleError } from '../../tasks/read-examples';
import { registerTask, servedQuestion } from '../../tasks/register';
import { abstentionHolderIn, holderIn } from '../../tasks/store';
import { Task } from '../../tasks/task';
import { toHttpError } from '../../answering/http-errors';
import { HttpError, invalid, Problem, ValidationError } from '../../wire/http-error';
import { Service } from '../service/service';
import { abstentionHeld } from './abstention-body';
import { isObject, parseRegistration } from './task-body';

/** Why a task cannot be stored when `holder`, another task, holds its question. */
function taskHeld(holder: Task | undefined): string | undefined {
  return holder && `another task, ${JSON.stringify(holder.id)}, holds this question (same type and option list): delete it first, or register under its id to replace it`;
}

/** A registration refused (422) when another task holds its question (one task per question). */
export function refuseHeld(held: string | undefined) {
  if (held) throw invalid(['body', 'examples', 0, 'request', 'questions'], held);
}

/**
 * A registered task stored under its id, inside a store change, unless another task holds its
 * question (checked there as well: another registration may have stored it meanwhile). Whether a
 * task of that id was replaced.
 */
export function storeRegistered<T extends { id: string }>(tasks: Map<string, T>, task: T, held: string | undefined): boolean {
  refuseHeld(held);
  const had = tasks.has(task.id);
  tasks.set(task.id, task);
  return had;
}

/** An engine or render failure of example i as an HTTP error naming the example. */
export function exampleError(e: ExampleError): unknown {
  const name = `example ${e.index}`;
  const translated = toHttpError(e.cause, () => name);
  if (!(translated instanceof HttpError) || typeof translated.detail !== 'string') return translated;
  const detail = translated.detail.replace(`the rendered prompt of question ${JSON.stringify(name)}`, 'the rendered prompt');
  return new HttpError(translated.status, `${name}: ${detail}`, translated.headers);
}

/** Stores each of `parsed` in `tasks` unless `refusal` gives a reason. */
function loadInto<T extends { id: string }>(tasks: Map<string, T>, parsed: T[], refusal: (t: T) => string | undefined) {
  const loaded: string[] = [], refused: { id: string; reason: string }[] = [];
  for (const t of parsed) {
    const reason = refusal(t);
    if (reason) refused.push({ id: t.id, reason });
    else {
      tasks.set(t.id, t);
      loaded.push(t.id);
    }
  }
  return { loaded, refused };
}

export function taskRoutes(router: Router, service: Service) {
  const store = service.tasks;

  router.post('/v1/tasks', async (ctx) => {
    const parsed = parseRegistration(ctx.request.body);
    const matchKey = servedQuestion(service, parsed.spec).match_key;
    refuseHeld(taskHeld(store.holderOf(matchKey, parsed.id)));
    let task: Task;
    try {
      task = await registerTask(service, store.fingerprint, parsed);
    } catch (e) {
      throw e instanceof ExampleError ? exampleError(e) : e;
    }
    const replaced = await store.change((tasks) => storeRegistered(tasks, task, taskHeld(holderIn(tasks, task.match_key, task.id))));
    ctx.body = { ...summaryOf(task), replaced };
  });

  router.get('/v1/tasks', (ctx) => {
    const full = ctx.query.full === '1' || ctx.query.full === 'true';
    const tasks = store.list();
    ctx.body = {
      ...(full ? exportForm(tasks, store.abstentionList(), store.fingerprint.hash) : { fingerprint: store.fingerprint.hash, tasks: tasks.map(summaryOf) }),
      enabled: service.taskBook.enabled,
      fingerprint_components: store.fingerprint.components,
      head_engine: service.headEngineReport,
      tasks_file: store.file ?? null,
      refused_at_start: store.refused,
    };
  });

  router.delete('/v1/tasks/:id', async (ctx) => {
    const id = ctx.params.id;
    const removed = await store.change((tasks) => tasks.delete(id));
    if (!removed) throw new HttpError(404, `no task has the id ${JSON.stringify(id)}`);
    ctx.body = { deleted: id };
  });

  router.post('/v1/tasks/import', async (ctx) => {
    const body = ctx.request.body as { tasks?: unknown; abstention_tasks?: unknown };
    const lists = ['tasks', 'abstention_tasks'] as const;
    const given = isObject(body) ? lists.filter((l) => body[l] !== undefined) : [];
    if (!isObject(body) || !given.length || given.some((l) => !Array.isArray(body[l])))
      throw invalid(['body', 'tasks'], 'must be an array of tasks in the full form of GET /v1/tasks?full=1 (and/or "abstention_tasks", an array of abstention tasks)', 'list_type');
    const problems: Problem[] = [];
    const parse = <T extends { id: string }>(list: (typeof lists)[number], parseOne: (v: unknown, loc: (string | number)[]) => { task?: T; problems: FormProblem[] }): T[] => {
      const parsed: T[] = [];
      ((body[list] ?? []) as unknown[]).forEach((raw, i) => {
        const r = parseOne(raw, ['body', list, i]);
        problems.push(...r.problems.map((p) => ({ ...p, type: 'value_error' })));
        if (r.task) parsed.push(r.task);
      });
      const ids = parsed.map((t) => t.id);
      ids.forEach((id, i) => ids.indexOf(id) !== i && problems.push({ loc: ['body', list, i, 'id'], msg: `repeats the id ${JSON.stringify(id)}`, type: 'value_error' }));
      return parsed;
    };
    const parsedTasks = parse('tasks', parseTask), parsedAbstention = parse('abstention_tasks', parseAbstentionTask);
    if (problems.length) throw new ValidationError(problems.slice(0, 20));
    ctx.body = await store.change((tasks, abstention) => {
      const result = loadInto(tasks, parsedTasks, (t) => store.fingerprintRefusal(t) ?? taskHeld(holderIn(tasks, t.match_key, t.id)));
      // The abstention part only when abstention tasks were sent: a tasks-only import answers as it always has.
      if (body.abstention_tasks === undefined) return result;
      return { ...result, abstention: loadInto(abstention, parsedAbstention, (t) => store.fingerprintRefusal(t) ?? abstentionHeld(abstentionHolderIn(abstention, t))) };
    });
  });
}
