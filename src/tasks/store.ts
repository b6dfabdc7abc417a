/**
 * The registered tasks, and their file (--tasks-file). Changes are serialized: each runs
 * after the last has been stored. With a file, a change is kept only once the file holds it:
 * the new content is written to a temporary file beside it, fsynced, renamed over it (atomic
 * on POSIX), and the directory fsynced, so a crash at any moment leaves the old file or the
 * new one, never a torn one. A change whose write fails is undone and reported.
 */
import * as fs from 'fs';
import * as path from 'path';
import { exportForm, parseTask } from './export';
import { differingComponents, Fingerprint } from './fingerprint';
import { Task } from './task';

export interface Refusal {
  id: string;
  reason: string;
}

export class TaskStore {
  private tasks = new Map<string, Task>();
  private queue: Promise<unknown> = Promise.resolve();
  /** Tasks of --tasks-file refused at start, with why. */
  readonly refusedAtStart: Refusal[] = [];
  /**
   * Those tasks as the file held them: written back with every change (so a server started
   * under another fingerprint never drops them from the file) until a task of the same id
   * is stored here.
   */
  private carried = new Map<string, unknown>();

  constructor(
    readonly fingerprint: Fingerprint,
    readonly file: string | undefined,
    private onChange: (tasks: Task[]) => void,
  ) {}

  list(): Task[] {
    return [...this.tasks.values()];
  }

  get(id: string): Task | undefined {
    return this.tasks.get(id);
  }

  /** The stored task other than `id` that holds `matchKey`, if any. */
  holderOf(matchKey: string, id: string): Task | undefined {
    return holderIn(this.tasks, matchKey, id);
  }

  /** Why `task` cannot be loaded under this server's fingerprint, or undefined. */
  fingerprintRefusal(task: Task): string | undefined {
    if (task.fingerprint === this.fingerprint.hash) return undefined;
    const differ = differingComponents(this.fingerprint, task.fingerprint_components);
    return `fitted under fingerprint ${task.fingerprint}, this server's is ${this.fingerprint.hash} (differing: ${differ.join(', ') || 'unknown'}): register it again from its examples`;
  }

  /**
   * Runs `change` on a copy of the tasks after every earlier change, stores the result and
   * returns what `change` returned. `change` may throw: nothing is altered then.
   */
  change<T>(change: (tasks: Map<string, Task>) => T): Promise<T> {
    const run = this.queue.then(async () => {
      const next = new Map(this.tasks);
      const result = change(next);
      const carried = new Map([...this.carried].filter(([id]) => !next.has(id)));
      if (this.file) {
        const form = exportForm([...next.values()], this.fingerprint.hash);
        await writeAtomically(this.file, JSON.stringify({ ...form, tasks: [...form.tasks, ...carried.values()] }));
      }
      this.tasks = next;
      this.carried = carried;
      this.onChange(this.list());
      return result;
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Loads --tasks-file at start: a missing file is an empty store; tasks refused are listed, the rest loaded. */
  load() {
    if (!this.file || !fs.existsSync(this.file)) return;
    const doc = JSON.parse(fs.readFileSync(this.file, 'utf8')); // unreadable: start-up fails rather than overwrite it
    const list = Array.isArray(doc?.tasks) ? doc.tasks : [];
    list.forEach((raw: unknown, i: number) => {
      const { task, problems } = parseTask(raw, ['tasks', i]);
      const id = String((raw as { id?: unknown })?.id ?? `#${i}`);
      const holder = task && this.holderOf(task.match_key, task.id);
      const reason = !task ? problems.map((p) => `${p.loc.join('.')}: ${p.msg}`).join('; ') : this.fingerprintRefusal(task) ?? (holder ? `its question is held by task ${holder.id}` : undefined);
      if (reason) {
        this.refusedAtStart.push({ id, reason });
        this.carried.set(this.carried.has(id) ? `${id}#${i}` : id, raw);
      } else this.tasks.set(task!.id, task!);
    });
    this.onChange(this.list());
  }
}

/** The task in `tasks` other than `id` that holds `matchKey` (one task per question), if any. */
export function holderIn(tasks: Map<string, Task>, matchKey: string, id: string): Task | undefined {
  for (const t of tasks.values()) if (t.match_key === matchKey && t.id !== id) return t;
  return undefined;
}

export async function writeAtomically(file: string, content: string) {
  const dir = path.dirname(path.resolve(file));
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.tmp`);
  const handle = await fs.promises.open(tmp, 'w');
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.promises.rename(tmp, file);
  const d = await fs.promises.open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}
