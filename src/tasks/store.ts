/**
 * The registered tasks and abstention tasks, and their file (--tasks-file). Changes are serialized: each runs
 * after the last has been stored. With a file, a change is kept only once the file holds it:
 * the new content is written to a temporary file beside it, fsynced, renamed over it (atomic
 * on POSIX), and the directory fsynced, so a crash at any moment leaves the old file or the
 * new one, never a torn one. A change whose write fails is undone and reported.
 *
 * Several replicas may share the file (shared-file.ts): a change holds the file's lock and
 * starts from the file as it is (re-read when another process replaced it), and `watch` reloads
 * the file whenever another process replaces it, refusing (and carrying) tasks fitted under
 * another fingerprint exactly as at start.
 */
import * as fs from 'fs';
import { writeAtomically } from '../common/atomic-write';
import { parseAbstentionTask } from './abstention/form';
import { AbstentionTask } from './abstention/task';
import { exportForm, FormProblem, parseTask } from './export';
import { contentHash, lockTasksFile, watchTasksFile } from './shared-file';
import { differingComponents, Fingerprint } from './fingerprint';
import { Task } from './task';

export interface Refusal {
  id: string;
  reason: string;
  /** Set for an abstention task. */
  kind?: 'abstention';
}

/** A task refused because another holds its question (one task per question, one abstention task per option set and match). */
export class TaskHeldError extends Error {}

/** What an import stored and refused, by id. */
export interface ImportResult {
  loaded: string[];
  refused: { id: string; reason: string }[];
}

/** A refusal as the logs say it. */
export const refusalLine = (r: Refusal) => `${r.kind === 'abstention' ? 'abstention task' : 'task'} ${r.id} in --tasks-file refused: ${r.reason}`;

export class TaskStore {
  private tasks = new Map<string, Task>();
  private abstention = new Map<string, AbstentionTask>();
  private queue: Promise<unknown> = Promise.resolve();
  /** Tasks of --tasks-file refused when it was last loaded (at start or on a reload), with why. */
  refused: Refusal[] = [];
  /** The content hash of the file as last loaded or written: a reload of the same content does nothing. */
  private seen?: string;
  /** Told of every reload of the file another process replaced, by the watcher or before a change (the server logs it). */
  onReload?: (r: { tasks: number; abstention_tasks: number; refused: Refusal[] } | { error: string }) => void;
  /**
   * Those tasks as the file held them: written back with every change (so a server started
   * under another fingerprint never drops them from the file) until a task of the same id
   * is stored here.
   */
  private carried = { tasks: new Map<string, unknown>(), abstention_tasks: new Map<string, unknown>() };

  constructor(
    readonly fingerprint: Fingerprint,
    readonly file: string | undefined,
    private onChange: (tasks: Task[], abstention: AbstentionTask[]) => void,
  ) {}

  list(): Task[] {
    return [...this.tasks.values()];
  }

  abstentionList(): AbstentionTask[] {
    return [...this.abstention.values()];
  }

  get(id: string): Task | undefined {
    return this.tasks.get(id);
  }

  /** The stored task other than `id` that holds `matchKey`, if any. */
  holderOf(matchKey: string, id: string): Task | undefined {
    return holderIn(this.tasks, matchKey, id);
  }

  /** Throws TaskHeldError when another task holds `matchKey`: checked before a registration's engine work, and again as it is stored. */
  refuseHeld(matchKey: string, id: string) {
    const reason = taskHeld(this.tasks, matchKey, id);
    if (reason) throw new TaskHeldError(reason);
  }

  /** The same for an abstention task, by its option set and match. */
  refuseAbstentionHeld(t: Pick<AbstentionTask, 'id' | 'match' | 'match_key'>) {
    const reason = abstentionHeld(this.abstention, t);
    if (reason) throw new TaskHeldError(reason);
  }

  /**
   * Stores a registered task under its id unless another task holds its question (checked inside
   * the change: another registration may have stored one meanwhile). Whether a task of that id was replaced.
   */
  register(task: Task): Promise<boolean> {
    return this.change((tasks) => storeUnlessHeld(tasks, task, taskHeld(tasks, task.match_key, task.id)));
  }

  registerAbstention(task: AbstentionTask): Promise<boolean> {
    return this.change((_, abstention) => storeUnlessHeld(abstention, task, abstentionHeld(abstention, task)));
  }

  /** Whether a task of that id was there to delete. */
  remove(id: string): Promise<boolean> {
    return this.change((tasks) => tasks.delete(id));
  }

  removeAbstention(id: string): Promise<boolean> {
    return this.change((_, abstention) => abstention.delete(id));
  }

  /**
   * Imported tasks stored, each unless fitted under another fingerprint or its question is held;
   * the abstention part only when abstention tasks were given (a tasks-only import answers as it always has).
   */
  importAll(tasks: Task[], abstention?: AbstentionTask[]): Promise<ImportResult & { abstention?: ImportResult }> {
    return this.change((stored, storedAbstention) => {
      const result = loadInto(stored, tasks, (t) => this.fingerprintRefusal(t) ?? taskHeld(stored, t.match_key, t.id));
      if (!abstention) return result;
      return { ...result, abstention: loadInto(storedAbstention, abstention, (t) => this.fingerprintRefusal(t) ?? abstentionHeld(storedAbstention, t)) };
    });
  }

  /** The image engine's fingerprint (--image-model), which image-route abstention tasks are fitted under. */
  imageFingerprint?: Fingerprint;

  /** Why `task` cannot be loaded under this server's fingerprint (its route's), or undefined. */
  fingerprintRefusal(task: Pick<Task, 'fingerprint' | 'fingerprint_components'> & { match?: string }): string | undefined {
    const ours = task.match === 'imajev_extension' ? this.imageFingerprint : this.fingerprint;
    if (!ours) return 'an image-route abstention task (match imajev_extension) needs a server started with --image-model';
    if (task.fingerprint === ours.hash) return undefined;
    const differ = differingComponents(ours, task.fingerprint_components);
    return `fitted under fingerprint ${task.fingerprint}, this server's is ${ours.hash} (differing: ${differ.join(', ') || 'unknown'}): register it again from its examples`;
  }

  /** Resolves once every change asked for so far is stored (the drain waits for it). */
  async flush(): Promise<void> {
    await this.queue;
  }

  /**
   * Runs `change` on copies of the tasks and abstention tasks after every earlier change, stores
   * the result and returns what `change` returned. `change` may throw: nothing is altered then.
   */
  change<T>(change: (tasks: Map<string, Task>, abstention: Map<string, AbstentionTask>) => T): Promise<T> {
    const run = this.queue.then(async () => {
      const unlock = this.file ? await lockTasksFile(this.file) : undefined;
      try {
        if (this.file) this.reload(true);
        return await this.store(change);
      } finally {
        await unlock?.();
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async store<T>(change: (tasks: Map<string, Task>, abstention: Map<string, AbstentionTask>) => T): Promise<T> {
    const next = new Map(this.tasks), nextAbstention = new Map(this.abstention);
    const result = change(next, nextAbstention);
    const carried = {
      tasks: new Map([...this.carried.tasks].filter(([id]) => !next.has(id))),
      abstention_tasks: new Map([...this.carried.abstention_tasks].filter(([id]) => !nextAbstention.has(id))),
    };
    if (this.file) {
      const form = exportForm([...next.values()], [...nextAbstention.values()], this.fingerprint.hash);
      const withCarried = JSON.stringify({ ...form, tasks: [...form.tasks, ...carried.tasks.values()], abstention_tasks: [...form.abstention_tasks, ...carried.abstention_tasks.values()] });
      await writeAtomically(this.file, withCarried);
      this.seen = contentHash(withCarried);
    }
    this.tasks = next;
    this.abstention = nextAbstention;
    this.carried = carried;
    this.onChange(this.list(), this.abstentionList());
    return result;
  }

  /** Loads --tasks-file at start: a missing file is an empty store; tasks refused are listed, the rest loaded. */
  load() {
    if (!this.file || !fs.existsSync(this.file)) return;
    const content = fs.readFileSync(this.file);
    this.replaceWith(JSON.parse(content.toString('utf8'))); // unreadable: start-up fails rather than overwrite it
    this.seen = contentHash(content);
  }

  /** Reloads the file whenever another process replaces it (see the header); returns the function that stops. */
  watch(): () => void {
    if (!this.file) return () => undefined;
    return watchTasksFile(this.file, () => {
      this.queue = this.queue.then(() => this.reload(false)).catch(() => undefined);
    });
  }

  /**
   * Loads the file again if its content is not what this store last loaded or wrote. A missing
   * file leaves the tasks as they are (the next change writes it again). So does an unreadable one:
   * before a change (`forChange`) that is an error, so nothing is written over a file this store
   * cannot read; for the watcher it is reported.
   */
  private reload(forChange: boolean) {
    let content: Buffer | undefined, doc: unknown;
    try {
      content = fs.readFileSync(this.file!);
      if (contentHash(content) === this.seen) return;
      doc = JSON.parse(content.toString('utf8'));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      const error = `--tasks-file ${this.file} cannot be read (${(e as Error).message}): the tasks are kept as they are`;
      if (forChange) throw new Error(error);
      return this.onReload?.({ error });
    }
    this.replaceWith(doc);
    this.seen = contentHash(content);
    this.onReload?.({ tasks: this.tasks.size, abstention_tasks: this.abstention.size, refused: this.refused });
  }

  /** The tasks of a tasks file's document, in place of these: those refused listed and carried. */
  private replaceWith(doc: any) {
    this.tasks = new Map();
    this.abstention = new Map();
    this.carried = { tasks: new Map(), abstention_tasks: new Map() };
    this.refused = [];
    this.loadList(doc?.tasks, 'tasks', parseTask, (t) => this.holderOf(t.match_key, t.id), (t) => this.tasks.set(t.id, t));
    this.loadList(doc?.abstention_tasks, 'abstention_tasks', parseAbstentionTask, (t) => abstentionHolderIn(this.abstention, t), (t) => this.abstention.set(t.id, t));
    this.onChange(this.list(), this.abstentionList());
  }

  private loadList<T extends Task | AbstentionTask>(
    entries: unknown,
    list: 'tasks' | 'abstention_tasks',
    parse: (v: unknown, loc: (string | number)[]) => { task?: T; problems: FormProblem[] },
    holderOf: (t: T) => { id: string } | undefined,
    keep: (t: T) => void,
  ) {
    (Array.isArray(entries) ? entries : []).forEach((raw: unknown, i: number) => {
      const { task, problems } = parse(raw, [list, i]);
      const id = String((raw as { id?: unknown })?.id ?? `#${i}`);
      const holder = task && holderOf(task);
      const reason = !task ? problems.map((p) => `${p.loc.join('.')}: ${p.msg}`).join('; ') : this.fingerprintRefusal(task) ?? (holder ? `its question is held by task ${holder.id}` : undefined);
      if (!reason) return keep(task!);
      this.refused.push({ id, reason, ...(list === 'abstention_tasks' ? { kind: 'abstention' as const } : {}) });
      const carried = this.carried[list];
      carried.set(carried.has(id) ? `${id}#${i}` : id, raw);
    });
  }
}

/** Why `matchKey` cannot be stored under `id` in `tasks`: another task holds it. */
function taskHeld(tasks: Map<string, Task>, matchKey: string, id: string): string | undefined {
  const holder = holderIn(tasks, matchKey, id);
  return holder && `another task, ${JSON.stringify(holder.id)}, holds this question (same type and option list): delete it first, or register under its id to replace it`;
}

function abstentionHeld(tasks: Map<string, AbstentionTask>, t: Pick<AbstentionTask, 'id' | 'match' | 'match_key'>): string | undefined {
  const holder = abstentionHolderIn(tasks, t);
  return holder && `another abstention task, ${JSON.stringify(holder.id)}, holds this option set with match "${holder.match}": delete it first, or register under its id to replace it`;
}

function storeUnlessHeld<T extends { id: string }>(tasks: Map<string, T>, task: T, held: string | undefined): boolean {
  if (held) throw new TaskHeldError(held);
  const had = tasks.has(task.id);
  tasks.set(task.id, task);
  return had;
}

/** Stores each of `parsed` in `tasks` unless `refusal` gives a reason. */
function loadInto<T extends { id: string }>(tasks: Map<string, T>, parsed: T[], refusal: (t: T) => string | undefined): ImportResult {
  const result: ImportResult = { loaded: [], refused: [] };
  for (const t of parsed) {
    const reason = refusal(t);
    if (reason) result.refused.push({ id: t.id, reason });
    else {
      tasks.set(t.id, t);
      result.loaded.push(t.id);
    }
  }
  return result;
}

/** The abstention task other than `t` that holds its option set and match mode (one per question), if any. */
function abstentionHolderIn(tasks: Map<string, AbstentionTask> | AbstentionTask[], t: Pick<AbstentionTask, 'id' | 'match' | 'match_key'>): AbstentionTask | undefined {
  for (const other of tasks.values()) if (other.match_key === t.match_key && other.match === t.match && other.id !== t.id) return other;
  return undefined;
}

/** The task in `tasks` other than `id` that holds `matchKey` (one task per question), if any. */
function holderIn(tasks: Map<string, Task>, matchKey: string, id: string): Task | undefined {
  for (const t of tasks.values()) if (t.match_key === matchKey && t.id !== id) return t;
  return undefined;
}
