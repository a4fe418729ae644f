/**
 * Body of the "New profiler report" dialog: the profiler path and the folder the report goes in.
 *
 * "Save report in" shows where the server would put the notebook for the path typed above
 * (GET /nbprofiler/report-dir) and follows that path until the user edits the folder; an
 * untouched folder is not sent, so the server's own rule decides even if an answer is late. An
 * answer never lands in the folder field while it has the focus: it would join what is being typed.
 * Everything user-provided is set as input values or textContent, never as HTML.
 */
import type { Dialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';
import { suggestedReportDir } from './api';

export interface IReportChoice {
  /** API path of the profiler folder or trace file. */
  path: string;
  /** API path of the folder the user chose for the notebook; undefined: the suggested folder. */
  dir?: string;
}

/** Strip the blanks and leading slashes users type; API paths are relative to the root. */
export function apiPath(text: string): string {
  return text.trim().replace(/^\/+/, '').replace(/\/+$/, '');
}

export class ReportBody extends Widget implements Dialog.IBodyWidget<IReportChoice> {
  constructor(initialPath: string) {
    super();
    this.addClass('jp-nbprofiler-PathDialog');
    this._path = this._field(
      'Profiler output folder or trace JSON file (relative to the Jupyter root):',
      'jp-nbprofiler-PathDialog-path',
      'e.g. runs/lenet/rank_0_ascend_ms'
    );
    this._dir = this._field(
      'Save report in (a folder outside the profiler output):',
      'jp-nbprofiler-PathDialog-dir',
      'next to the profiler output'
    );
    this._hint = document.createElement('div');
    this._hint.className = 'jp-nbprofiler-PathDialog-hint';
    this.node.append(this._hint);

    this._path.value = initialPath;
    this._path.addEventListener('input', () => this._scheduleSuggestion());
    this._dir.addEventListener('input', () => {
      this._dirEdited = true;
      this._hint.textContent = '';
    });
    this._dir.addEventListener('blur', () => {
      if (this._answerHeld) {
        void this._suggest(); // left without an edit: the folder for the current path after all
      }
    });
    void this._suggest();
  }

  getValue(): IReportChoice {
    const path = apiPath(this._path.value);
    return this._dirEdited ? { path, dir: apiPath(this._dir.value) } : { path };
  }

  dispose(): void {
    window.clearTimeout(this._timer);
    super.dispose();
  }

  private _field(text: string, className: string, placeholder: string): HTMLInputElement {
    const label = document.createElement('label');
    label.textContent = text;
    const input = document.createElement('input');
    input.className = `jp-mod-styled ${className}`;
    input.type = 'text';
    input.placeholder = placeholder;
    label.append(input);
    this.node.append(label);
    return input;
  }

  private _scheduleSuggestion(): void {
    window.clearTimeout(this._timer);
    this._timer = window.setTimeout(() => void this._suggest(), 250);
  }

  /** Show the server's folder for the current path, unless the user chose one. */
  private async _suggest(): Promise<void> {
    if (this._dirEdited) {
      return;
    }
    const ticket = ++this._ticket;
    const path = apiPath(this._path.value);
    let dir: string | null = null;
    let problem = '';
    try {
      dir = await suggestedReportDir(path);
    } catch (reason) {
      problem = (reason as Error).message ?? String(reason);
    }
    if (ticket !== this._ticket || this._dirEdited || this.isDisposed) {
      return; // the path changed again, or the user took over the folder field
    }
    // in the folder field, what the user types decides; leaving it without an edit asks again
    this._answerHeld = dir !== null && document.activeElement === this._dir;
    if (dir === null) {
      this._hint.textContent = problem;
    } else if (!this._answerHeld) {
      this._dir.value = dir === '' ? '/' : dir; // '' is the root; an empty field would read "none"
      this._hint.textContent = '';
    }
    this.node.dataset.suggestedFor = path; // lets tests wait for the answer
  }

  private _path: HTMLInputElement;
  private _dir: HTMLInputElement;
  private _hint: HTMLElement;
  private _dirEdited = false;
  private _answerHeld = false;
  private _ticket = 0;
  private _timer = 0;
}
