/** Labels are single tokens in context and distinct; up to 255 are found per tokenizer. */
import { LabelsInContext, letterCandidates, tokenInContext } from '../../src/rendering/labels';
import { defaultProfile } from '../../src/rendering/profile';
import { Renderer } from '../../src/rendering/renderer';
import { modelTokenizer } from '../helpers/tokens';
import { tinyModel } from '../helpers/models';

test.each([
  ['tiny-qwen3', 255],
  ['tiny-llama', 255],
])('%s: %i distinct single-token letter labels after the cue', async (name, count) => {
  const r = await Renderer.create(await modelTokenizer(tinyModel(name)), defaultProfile);
  expect(r.letters.texts).toHaveLength(count);
  expect(new Set(r.letters.ids).size).toBe(count);
  expect(r.letters.texts.slice(0, 3)).toEqual(['A', 'B', 'C']);
});

test('" A" after "Answer:" and "A" at the start of the assistant turn are different tokens, each checked in context', async () => {
  const tok = await modelTokenizer(tinyModel('tiny-qwen3'));
  const cue = await Renderer.create(tok, defaultProfile);
  const turn = await Renderer.create(tok, { ...defaultProfile, answerPosition: 'turn-start' });
  expect(cue.tail.endsWith('Answer:')).toBe(true);
  expect(turn.tail.endsWith('</think>\n\n')).toBe(true);
  expect(cue.letters.ids[0]).toBe(tok.tokenToId('ĠA'));
  expect(turn.letters.ids[0]).toBe(tok.tokenToId('A'));
  // A label that is two tokens in context is refused.
  expect(await tokenInContext(tok, 'x Answer:', 'Zyzzyva', true)).toBeUndefined();
});

test('the Mistral SentencePiece vocabulary: labels verified in context; the count is what it is', async () => {
  const tok = await modelTokenizer(tinyModel('tiny-mistral'));
  const set = await new LabelsInContext(tok, 'Which?\n\nAnswer:', true).find(letterCandidates);
  expect(set.texts.length).toBeGreaterThan(26);
  for (const [i, t] of set.texts.slice(0, 30).entries()) {
    const ids = await tok.encode('Which?\n\nAnswer: ' + t);
    expect(ids[ids.length - 1]).toBe(set.ids[i]);
  }
});

test('a rendered request: the state segment is shared and every question ends at the cue', async () => {
  const tok = await modelTokenizer(tinyModel('tiny-llama'));
  const r = await Renderer.create(tok, defaultProfile);
  const out = await r.render('Some state.', [
    { type: 'noul', instructions: 'Q1?', options: [{ key: 'true', description: 'yes side' }, { key: 'false', description: null }] },
    { type: 'choice', instructions: 'Q2?', options: [{ key: 'x', description: 'ex' }, { key: 'y', description: null }] },
  ]);
  expect(out.prefixText.startsWith('<|begin_of_text|>')).toBe(true);
  expect(out.prefixText.endsWith('</state>')).toBe(true);
  expect(out.questions[0].text).toContain('Yes: yes side');
  expect(out.questions[1].text).toContain('A. x: ex\nB. y');
  for (const q of out.questions) expect(q.text.endsWith('<|start_header_id|>assistant<|end_header_id|>\n\nAnswer:')).toBe(true);
});

// The newer families' chat templates (Gemma 3's own; Phi-4-mini's and OLMo 2's written over their stand-in
// tokenizers by the generator; Llama 3's for SmolLM3): the system text opens the prompt (Gemma 3 folds it
// into the user turn), every question ends at the assistant turn's opening and the cue, 255 letter labels.
test.each([
  ['tiny-gemma3', '<bos><start_of_turn>user\nYou answer', '<end_of_turn>\n<start_of_turn>model\nAnswer:'],
  ['tiny-phi3', '<|system|>You answer', '<|end|><|assistant|>Answer:'],
  ['tiny-olmo2', '<|endoftext|><|system|>\nYou answer', '\n<|assistant|>\nAnswer:'],
  ['tiny-smollm3', '<|begin_of_text|><|start_header_id|>system<|end_header_id|>', '<|start_header_id|>assistant<|end_header_id|>\n\nAnswer:'],
])('%s: its chat template frames the state and every question', async (name, start, end) => {
  const r = await Renderer.create(await modelTokenizer(tinyModel(name)), defaultProfile);
  expect(r.letters.texts).toHaveLength(255);
  const out = await r.render('Some state.', [{ type: 'choice', instructions: 'Q?', options: [{ key: 'x', description: 'ex' }, { key: 'y', description: null }] }]);
  expect(out.prefixText.startsWith(start)).toBe(true);
  expect(out.questions[0].text.endsWith(end)).toBe(true);
});
