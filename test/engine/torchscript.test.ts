/**
 * The TorchScript path: a module exported by Debian's python3-torch following
 * the contract in docs/engine.md ("TorchScript models") answers like the native checkpoint it was made from.
 */
import { Engine } from '../../src/engine/engine';
import { tinyModel, torchscriptModel, torchscriptModelNames } from '../helpers/models';
import { maxAbsDiff } from '../helpers/reference';
import { tokenizeTexts } from '../helpers/tokens';

describe.each(torchscriptModelNames)('TorchScript export of %s', (name) => {
  test('loads, reports its format, and answers packed questions like the native engine (fp32, 1e-5)', async () => {
    const t = await tokenizeTexts(tinyModel(name));
    const request = { state: t.state, questions: t.questions.map((tokens) => ({ tokens, labelIds: t.labels })), wantHidden: true };
    const scripted = await Engine.open({ path: torchscriptModel(name), threads: 2 });
    const native = await Engine.open({ path: tinyModel(name), threads: 2 });
    try {
      expect(scripted.info.format).toBe('torchscript');
      expect(scripted.info.vocabSize).toBe(native.info.vocabSize);
      const [a, b] = [await scripted.answer(request), await native.answer(request)];
      a.answers.forEach((ans, i) => {
        expect(maxAbsDiff(ans.labelLogits, b.answers[i].labelLogits)).toBeLessThanOrEqual(1e-5);
        expect(maxAbsDiff(ans.hidden!, b.answers[i].hidden!)).toBeLessThanOrEqual(1e-4);
      });
    } finally {
      await scripted.close();
      await native.close();
    }
  });
});
