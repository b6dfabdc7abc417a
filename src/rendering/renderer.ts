/**
 * Renders a state and its questions into token segments for the engine: the
 * shared prefix (chat header and, in the state-first layout, the state) and
 * one suffix per question ending at the readout position. Labels are found
 * once at start-up for this tokenizer and profile, and verified in context.
 */
import { randomBytes } from 'crypto';
import { ModelTokenizer } from '../tokenizer/tokenizer';
import { digitCandidates, LabelSet, LabelsInContext, letterCandidates, MAX_OPTIONS, tokenInContext } from './labels';
import { PromptProfile, QuestionType } from './profile';

export interface QuestionOption {
  key: string;
  description: string | null;
}

/** A question in engine terms: its text, and its options in display order. */
export interface QuestionSpec {
  type: QuestionType;
  instructions: string;
  options: QuestionOption[];
}

export interface RenderedQuestion {
  text: string;
  tokens: readonly number[];
  /** Option keys in display order, and the token id of each one's label. */
  keys: string[];
  labelTexts: string[];
  labelIds: number[];
}

export interface RenderedRequest {
  prefixText: string;
  prefixTokens: readonly number[];
  questions: RenderedQuestion[];
}

export class RenderError extends Error {}

/**
 * A prompt longer than the context, found before the engine is asked: exactly
 * (`exact`, its tokens counted) or by a lower bound from its UTF-8 bytes, so
 * that a huge state is refused without tokenizing it.
 */
export class PromptTooLongError extends Error {
  constructor(readonly question: number, readonly tokens: number, readonly contextLimit: number, readonly exact: boolean, readonly bytes?: number) {
    super(`prompt of question ${question}: ${exact ? '' : 'at least '}${tokens} tokens, the context holds ${contextLimit}`);
  }
}

/**
 * The chat template's text before and after the user message. The prompt is
 * segmented by these positions, never by searching the rendered text: no user
 * text can move a segment boundary. Found with a probe string only this
 * function renders, then verified with a second one, so a template that
 * rewrites the user message is refused at start-up instead of mis-segmented.
 */
function templateFrame(tok: ModelTokenizer, profile: PromptProfile): { before: string; after: string } {
  const probe = `tqserve-probe-${randomBytes(8).toString('hex')}`;
  const full = applyTemplate(tok, profile, probe);
  const at = full.indexOf(probe);
  const frame = { before: full.slice(0, at), after: full.slice(at + probe.length) };
  const check = `Question: x?\n\n<state>\n y \n</state>\n${probe}`;
  if (at < 0 || applyTemplate(tok, profile, check) !== frame.before + check + frame.after)
    throw new Error('the chat template does not render the user message verbatim; use --template plain');
  return frame;
}

const defaults: Record<QuestionType, string> = {
  noul: 'Based on the text, is the answer yes?',
  choice: 'Which option fits the text best?',
  score: 'Which level fits the text best?',
};

export class Renderer {
  private constructor(
    readonly tokenizer: ModelTokenizer,
    readonly profile: PromptProfile,
    readonly usesChatTemplate: boolean,
    /** Text from the start of the prompt to the user content (the chat header, or a plain prompt's BOS). */
    readonly head: string,
    /** Text from the end of the user content to the readout position. */
    readonly tail: string,
    readonly letters: LabelSet,
    readonly digits: LabelSet,
    readonly yesNo: LabelSet,
  ) {}

  static defaultInstructions(type: QuestionType): string {
    return defaults[type];
  }

  static async create(tokenizer: ModelTokenizer, profile: PromptProfile): Promise<Renderer> {
    const chat = profile.template === 'chat' && tokenizer.hasChatTemplate;
    const cue = profile.answerPosition === 'cue' || !chat;
    let head: string, tail: string;
    if (chat) {
      const frame = templateFrame(tokenizer, profile);
      [head, tail] = [frame.before, frame.after + (cue ? 'Answer:' : '')];
    } else {
      const bos = tokenizer.bosToken;
      [head, tail] = [bos && tokenizer.tokenToId(bos) !== undefined ? bos : '', '\n\nAnswer:'];
    }
    const context = 'Which option?' + tail;
    const inContext = new LabelsInContext(tokenizer, context, cue);
    const letters = await inContext.find(letterCandidates);
    const digits = await inContext.find(digitCandidates);
    const yesNo = await inContext.find(['Yes', 'No'], 2);
    if (letters.texts.length < 2) throw new Error('the tokenizer has fewer than 2 single-token letter labels in context');
    if (yesNo.texts.length < 2) throw new Error('"Yes" and "No" are not single distinct tokens in context; use --yes-no letters');
    return new Renderer(tokenizer, profile, chat, head, tail, letters, digits, yesNo);
  }

  get spacedLabels(): boolean {
    return this.profile.answerPosition === 'cue' || !this.usesChatTemplate;
  }

  /** The most options a choice or score question can have with this tokenizer and profile. */
  get maxOptions(): number {
    return Math.min(MAX_OPTIONS, this.letters.texts.length);
  }

  /**
   * The shared prefix and each question's suffix, tokenized. With `contextLimit`, a prompt (prefix
   * plus one suffix) that cannot fit is refused before it is tokenized when its bytes alone prove it
   * (ModelTokenizer.maxBytesPerToken), else once its tokens are counted. `cacheSalt`: the texts'
   * tokens are kept for requests of that salt only.
   */
  async render(stateText: string, questions: QuestionSpec[], contextLimit = Infinity, cacheSalt?: string): Promise<RenderedRequest> {
    const stateBlock = `<state>\n${stateText}\n</state>`;
    const first = this.profile.layout === 'state-first';
    const bodies = await Promise.all(questions.map((q) => this.questionBlock(q)));
    const prefixText = first ? this.head + stateBlock : this.head;
    const suffixes = bodies.map((b) => (first ? b.text : b.text + '\n\n' + stateBlock) + this.tail);
    const perToken = this.tokenizer.maxBytesPerToken;
    if (perToken !== undefined && Number.isFinite(contextLimit)) {
      const prefixBytes = Buffer.byteLength(prefixText);
      suffixes.forEach((suffix, i) => {
        const bytes = prefixBytes + Buffer.byteLength(suffix);
        const atLeast = Math.ceil(bytes / perToken);
        if (atLeast > contextLimit) throw new PromptTooLongError(i, atLeast, contextLimit, false, bytes);
      });
    }
    const prefixTokens = await this.tokenizer.encode(prefixText, cacheSalt);
    const rendered: RenderedQuestion[] = [];
    for (const [i, body] of bodies.entries()) {
      const tokens = await this.tokenizer.encode(suffixes[i], cacheSalt);
      if (prefixTokens.length + tokens.length > contextLimit) throw new PromptTooLongError(i, prefixTokens.length + tokens.length, contextLimit, true);
      rendered.push({ ...body, text: suffixes[i], tokens });
    }
    return { prefixText, prefixTokens, questions: rendered };
  }

  private labelsFor(q: QuestionSpec): LabelSet {
    const n = q.options.length;
    const set = q.type === 'noul' ? (this.yesNoWords(q) ? this.yesNo : this.letters) : q.type === 'score' && this.profile.scoreLabels === 'digits' ? this.digits : q.type === 'choice' && this.profile.choiceLabels === 'digits' ? this.digits : this.letters;
    if (n > MAX_OPTIONS) throw new RenderError(`${n} options: a question may have at most ${MAX_OPTIONS}`);
    if (n > set.texts.length) throw new RenderError(`${n} options, but this tokenizer has only ${set.texts.length} single-token labels in this prompt format`);
    return { texts: set.texts.slice(0, n), ids: set.ids.slice(0, n) };
  }

  /**
   * A yes/no question read as the words Yes/No (--yes-no words); one with a third option (an abstain
   * option, docs/abstention.md) is lettered: A. Yes, B. No, C. <its text>.
   */
  private yesNoWords(q: QuestionSpec): boolean {
    return this.profile.yesNo === 'words' && q.options.length === 2;
  }

  /** The request's own keys as labels, when each is one distinct token in context. */
  private async keyLabels(q: QuestionSpec): Promise<LabelSet | undefined> {
    const ids: number[] = [];
    for (const o of q.options) {
      const id = await tokenInContext(this.tokenizer, 'Which option?' + this.tail, o.key, this.spacedLabels);
      if (id === undefined || ids.includes(id)) return undefined;
      ids.push(id);
    }
    return { texts: q.options.map((o) => o.key), ids };
  }

  private async questionBlock(q: QuestionSpec): Promise<Omit<RenderedQuestion, 'tokens'>> {
    const keys = q.options.map((o) => o.key);
    const question = `Question: ${q.instructions}`;
    // The option lines before the instructions, headed "Options:" (there they would otherwise read as
    // part of the state), or after them; Yes/No words keep their "Answer Yes or No." right after the question.
    const block = (options: string[], closing: string, closingFirst = false) => {
      const lines = this.profile.optionsPosition === 'before' ? ['Options:', ...options, question, closing]
        : closingFirst ? [question, closing, ...options] : [question, ...options, closing];
      return '\n\n' + lines.join('\n');
    };
    if (q.type === 'noul' && this.yesNoWords(q)) {
      const labels = this.labelsFor(q);
      const described = q.options.flatMap((o, i) => (o.description ? [`${labels.texts[i]}: ${o.description}`] : []));
      const text = block(described, `Answer ${labels.texts.join(' or ')}.`, true);
      return { text, keys, labelTexts: labels.texts, labelIds: labels.ids };
    }
    const own = q.type === 'choice' && this.profile.choiceLabels === 'keys' ? await this.keyLabels(q) : undefined;
    const labels = own ?? this.labelsFor(q);
    const options = q.options.map((o, i) => {
      if (own) return o.description ? `${o.key}: ${o.description}` : o.key;
      // Lettered lines: "A. key: description"; a score level shows its description only, yes/no its word.
      const shown = q.type === 'noul' ? (o.key === 'true' ? 'Yes' : o.key === 'false' ? 'No' : o.key) : q.type === 'score' ? null : o.key;
      const parts = [shown, o.description].filter((p): p is string => !!p);
      return `${labels.texts[i]}.${parts.length ? ' ' + parts.join(': ') : ''}`;
    });
    const text = block(options, own ? 'Answer with the name of one option.' : 'Answer with the label of one option.');
    return { text, keys, labelTexts: labels.texts, labelIds: labels.ids };
  }
}

function applyTemplate(tok: ModelTokenizer, profile: PromptProfile, user: string): string {
  const messages = profile.systemTurn ? [{ role: 'system' as const, content: profile.systemTurn }, { role: 'user' as const, content: user }] : [{ role: 'user' as const, content: user }];
  return tok.applyChatTemplate(messages, true);
}
