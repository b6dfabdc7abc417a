/** What answering needs: the engine, the renderer, the temperatures and what stands between readout and answer. */
import { QuestionSpec } from '../rendering/renderer';
import { Temperatures } from '../rendering/profile';
import { Renderer } from '../rendering/renderer';
import { EngineLike } from './engine-like';

/**
 * The step between a question's baseline distribution (the readout's, tempered and averaged
 * over the orders asked) and its answer: the registered tasks (src/tasks/). `taskFor` is asked
 * once per question; undefined: the question is asked as sent and answered with its baseline.
 */
export interface TaskLookup {
  taskFor(spec: QuestionSpec): QuestionTask | undefined;
}

/** A task that applies to one question. */
export interface QuestionTask {
  id: string;
  /**
   * The question as it is put to the model: a task reads its examples with their options in
   * one order (its own), so a question it applies to is asked in that order too, whatever
   * order its keys arrived in.
   */
  asked: QuestionSpec;
  /** Whether it reads the hidden state at the readout position (the head engine's when there is one). */
  wantsHidden: boolean;
  /** The task and its fit: a threshold fitted on what this task answered is used only while it still applies. */
  identity: string;
  /** The distribution to answer with; undefined: the baseline stands. */
  apply(baseline: Map<string, number>, hidden?: Float32Array): Map<string, number> | undefined;
}

/**
 * The step before the tasks: a choice or yes/no question's abstain option ("can't tell"),
 * the request's own option or one the server appends (src/tasks/abstention/). `abstentionFor` is
 * asked once per question; undefined: the question has no abstain option.
 */
export interface Abstentions {
  abstentionFor(spec: QuestionSpec): QuestionAbstention | undefined;
}

export interface QuestionAbstention {
  /** The question with its abstain option: the request's own, or appended last. */
  asked: QuestionSpec;
  /** The abstain option's key in `asked`. */
  key: string;
  /** The server added it: its probability is then not among the reported probabilities. */
  appended: boolean;
  /**
   * An abstention task's fitted threshold on the abstain option's probability; undefined: the
   * default rule (abstain when the abstain option is the most probable). `fittedWith`: the
   * identity of the task applied when it was fitted (null: none); the threshold is used only
   * while the same task applies, as it reads the distribution that task answers with.
   */
  threshold?: { task: string; value: number; fittedWith: string | null };
}

/** A second engine process (--head-engine) with its own model and renderer, read for intent heads' hidden states. */
export interface HeadEngine {
  engine: EngineLike;
  renderer: Renderer;
}

export interface AnsweringContext {
  engine: EngineLike;
  renderer: Renderer;
  temperatures: Temperatures;
  servedName: string;
  taskBook?: TaskLookup;
  abstentions?: Abstentions;
  headEngine?: HeadEngine;
  /** The image engine's <|image_pad|> id: its prompts must hold one per image. */
  imagePadId?: number;
}
