/**
 * POST /v1/tasks/import's body: `tasks` and/or `abstention_tasks`, each an array in the full form of
 * GET /v1/tasks?full=1. Every problem is listed (each entry checked whole, no id repeated within a
 * list) so that a malformed import is refused whole before anything is stored.
 */
import { parseAbstentionTask } from './abstention/form';
import { AbstentionTask } from './abstention/task';
import { FormProblem, isObject, parseTask } from './export';
import { Task } from './task';

export interface ParsedImport {
  tasks: Task[];
  /** Present when the body gave abstention tasks. */
  abstention?: AbstentionTask[];
  problems: FormProblem[];
}

type Parse<T> = (v: unknown, loc: (string | number)[]) => { task?: T; problems: FormProblem[] };

function parseList<T extends { id: string }>(entries: unknown[], list: string, parse: Parse<T>, problems: FormProblem[]): T[] {
  const parsed: T[] = [];
  entries.forEach((raw, i) => {
    const r = parse(raw, ['body', list, i]);
    problems.push(...r.problems);
    if (r.task) parsed.push(r.task);
  });
  const ids = parsed.map((t) => t.id);
  ids.forEach((id, i) => ids.indexOf(id) !== i && problems.push({ loc: ['body', list, i, 'id'], msg: `repeats the id ${JSON.stringify(id)}` }));
  return parsed;
}

export function parseImport(body: unknown): ParsedImport {
  const given = isObject(body) ? (['tasks', 'abstention_tasks'] as const).filter((l) => body[l] !== undefined) : [];
  if (!isObject(body) || !given.length || given.some((l) => !Array.isArray(body[l]))) {
    const msg = 'must be an array of tasks in the full form of GET /v1/tasks?full=1 (and/or "abstention_tasks", an array of abstention tasks)';
    return { tasks: [], problems: [{ loc: ['body', 'tasks'], msg, type: 'list_type' }] };
  }
  const problems: FormProblem[] = [];
  const tasks = parseList(body.tasks ?? [], 'tasks', parseTask, problems);
  const abstention = body.abstention_tasks && parseList(body.abstention_tasks, 'abstention_tasks', parseAbstentionTask, problems);
  return { tasks, ...(abstention ? { abstention } : {}), problems };
}
