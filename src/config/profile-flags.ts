/** The base's prompt profile, renderer and temperatures with the start-up flags applied. */
import { PromptProfile, Temperatures } from '../rendering/profile';
import { Renderer } from '../rendering/renderer';
import { ModelTokenizer } from '../tokenizer/tokenizer';
import { ResolvedBase } from './bases';
import { Flags } from './flags';

/** The renderer a base is served with: its own tokenizer and chat template, its prompt profile under the flags. */
export function rendererFor(base: ResolvedBase, flags: Flags): Promise<Renderer> {
  return ModelTokenizer.load(base.checkpoint).then((tokenizer) => Renderer.create(tokenizer, promptProfile(base.profile.prompt, flags)));
}

export function promptProfile(base: PromptProfile, f: Flags): PromptProfile {
  const system = f['system-turn'];
  return {
    layout: f.layout ?? base.layout,
    template: f.template ?? base.template,
    systemTurn: system === undefined ? base.systemTurn : system === 'none' || system === '' ? null : system,
    answerPosition: f['answer-position'] ?? base.answerPosition,
    choiceLabels: f['choice-labels'] ?? base.choiceLabels,
    scoreLabels: f['score-labels'] ?? base.scoreLabels,
    yesNo: f['yes-no'] ?? base.yesNo,
    optionsPosition: f['options-position'] ?? base.optionsPosition,
  };
}

export function temperaturesOf(base: Temperatures, f: Flags): Temperatures {
  return {
    noul: f['temperature-noul'] ?? base.noul,
    choice: f['temperature-choice'] ?? base.choice,
    score: f['temperature-score'] ?? base.score,
  };
}
