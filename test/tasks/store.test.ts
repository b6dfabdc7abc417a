/**
 * The store's rules, without HTTP (src/tasks/store.ts): one task per question and one abstention task
 * per option set and match, a held question refused before and while storing, a task replaced under
 * its own id, imports refusing tasks fitted under another fingerprint or whose question is held, and
 * a refused change leaving everything as it was. The routes over HTTP: routes.test.ts, route-errors.test.ts.
 */
import { AbstentionTask } from '../../src/tasks/abstention/task';
import { TaskHeldError, TaskStore } from '../../src/tasks/store';
import { matchKeyOf, Task } from '../../src/tasks/task';

const fingerprint = { hash: 'fp-ours', components: { checkpoint: 'tiny' } };
const options = [{ key: 'a', description: null }, { key: 'b', description: null }];
const otherOptions = [{ key: 'x', description: null }, { key: 'y', description: null }];

function task(id: string, opts = options, fp = fingerprint.hash): Task {
  return {
    id, type: 'choice', instructions: '', options: opts, match_key: matchKeyOf('choice', opts), applied: 'calibration',
    calibration: { a: 1, b: { a: 0, b: 0 }, lambda: null }, head: null, record: {} as Task['record'],
    fingerprint: fp, fingerprint_components: {}, created_at: '2026-11-25T00:00:00Z',
  };
}

function abstention(id: string, opts = options): AbstentionTask {
  return {
    id, type: 'choice', instructions: '', match: 'option_set', option: { append: 'unsure' }, abstain_option: { key: 'unsure', description: null },
    options: opts, match_key: matchKeyOf('choice', opts), threshold: 0.5, applied: true, fitted_with: null,
    record: {} as AbstentionTask['record'], fingerprint: fingerprint.hash, fingerprint_components: {}, created_at: '2026-11-25T00:00:00Z',
  };
}

const newStore = () => new TaskStore(fingerprint, undefined, () => undefined);
const ids = (store: TaskStore) => store.list().map((t) => t.id);

test('one task per question: another id for a held question is refused, before and while storing; its own id replaces it', async () => {
  const store = newStore();
  expect(await store.register(task('first'))).toBe(false);
  expect(() => store.refuseHeld(task('second').match_key, 'second')).toThrow(/another task, "first", holds this question/);
  await expect(store.register(task('second'))).rejects.toThrow(TaskHeldError);
  expect(ids(store)).toEqual(['first']);
  expect(() => store.refuseHeld(task('first').match_key, 'first')).not.toThrow();
  expect(await store.register(task('first'))).toBe(true);
  expect(await store.register(task('other', otherOptions))).toBe(false);
  expect(ids(store)).toEqual(['first', 'other']);
  expect(await store.remove('first')).toBe(true);
  expect(await store.remove('first')).toBe(false);
  expect(ids(store)).toEqual(['other']);
});

test('one abstention task per option set and match, apart from the tasks', async () => {
  const store = newStore();
  await store.register(task('calibrated'));
  expect(await store.registerAbstention(abstention('abstain'))).toBe(false);
  expect(() => store.refuseAbstentionHeld(abstention('again'))).toThrow(/another abstention task, "abstain", holds this option set with match "option_set"/);
  await expect(store.registerAbstention(abstention('again'))).rejects.toThrow(TaskHeldError);
  expect(await store.registerAbstention({ ...abstention('again'), match: 'imajev_extension' })).toBe(false);
  expect(store.abstentionList().map((t) => t.id)).toEqual(['abstain', 'again']);
  expect(await store.removeAbstention('abstain')).toBe(true);
  expect(ids(store)).toEqual(['calibrated']);
});

test('an import stores what it can and says why it refused the rest; abstention only when given', async () => {
  const store = newStore();
  await store.register(task('held'));
  const result = await store.importAll([task('clash'), task('foreign', otherOptions, 'fp-theirs'), task('fine', otherOptions)]);
  expect(result.loaded).toEqual(['fine']);
  expect(result.refused.map((r) => [r.id, r.reason.split(',')[0]])).toEqual([
    ['clash', 'another task'],
    ['foreign', 'fitted under fingerprint fp-theirs'],
  ]);
  expect(result).not.toHaveProperty('abstention');
  const both = await store.importAll([], [abstention('a1'), abstention('a2')]);
  expect(both.abstention).toEqual({ loaded: ['a1'], refused: [{ id: 'a2', reason: expect.stringMatching(/holds this option set/) }] });
  expect(ids(store)).toEqual(['held', 'fine']);
});
