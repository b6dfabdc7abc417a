/** The tasks of a server or of `decide`: the fingerprint, the store (loading --tasks-file) and the books the pipeline applies. */
import { AbstentionBook } from './abstention/book';
import { PromptProfile, Temperatures } from '../rendering/profile';
import { TaskBook } from './apply';
import { computeFingerprint, Fingerprint } from './fingerprint';
import { TaskStore } from './store';

/** Throws when the file cannot be read as a tasks file (it is then left as it is). */
export function openTasks(o: {
  file?: string;
  enabled: boolean;
  abstention: { enabled: boolean; defaultOption?: string };
  checkpoint: string;
  profile: PromptProfile;
  temperatures: Temperatures;
  headCheckpoint?: string;
  /** The engines' weight quantization (--quantization): part of the fingerprint unless none. */
  quantization?: string;
  /** The image engine's fingerprint (--image-model): image-route abstention tasks load under it. */
  imageFingerprint?: Fingerprint;
}) {
  const book = new TaskBook(o.enabled);
  const abstentionBook = new AbstentionBook(o.abstention.enabled, o.abstention.defaultOption);
  // The image route's (--image-model): the same abstain option, and the tasks matched on requests with images.
  const imageAbstentionBook = new AbstentionBook(o.abstention.enabled, o.abstention.defaultOption, 'imajev_extension');
  const fingerprint = computeFingerprint({ checkpoint: o.checkpoint, profile: o.profile, temperatures: o.temperatures, headEngine: o.headCheckpoint ? { checkpoint: o.headCheckpoint } : null, quantization: o.quantization });
  const store = new TaskStore(fingerprint, o.file, (list, abstention) => {
    book.set(list);
    abstentionBook.set(abstention);
    imageAbstentionBook.set(abstention);
  });
  store.imageFingerprint = o.imageFingerprint;
  store.load();
  return { book, abstentionBook, imageAbstentionBook, store };
}
