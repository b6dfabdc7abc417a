/** The tasks of a server or of `decide`: the fingerprint, the store (loading --tasks-file) and the book the pipeline applies. */
import { PromptProfile, Temperatures } from '../rendering/profile';
import { TaskBook } from './apply';
import { computeFingerprint } from './fingerprint';
import { TaskStore } from './store';

/** Throws when the file cannot be read as a tasks file (it is then left as it is). */
export function openTasks(o: { file?: string; enabled: boolean; checkpoint: string; profile: PromptProfile; temperatures: Temperatures; headCheckpoint?: string }) {
  const book = new TaskBook(o.enabled);
  const fingerprint = computeFingerprint({ checkpoint: o.checkpoint, profile: o.profile, temperatures: o.temperatures, headEngine: o.headCheckpoint ? { checkpoint: o.headCheckpoint } : null });
  const store = new TaskStore(fingerprint, o.file, (list) => book.set(list));
  store.load();
  return { book, store };
}
