/**
 * Sidebar panel: the profiler runs under the file browser's current folder.
 *
 * Discovery happens on the server (GET /nbprofiler/runs, run in a worker thread), so a
 * big tree never blocks the UI; answers that arrive after the folder changed are dropped.
 * Everything user-provided (folder and file names) is set with textContent, never as HTML.
 */
import type { FileBrowser } from '@jupyterlab/filebrowser';
import { Widget } from '@lumino/widgets';
import { IRun, listRuns } from './api';
import { profilerIcon } from './icon';

/**
 * The date shown for a run: when it was profiled ("profiled 2026-11-21 04:25"), or, where nothing in
 * the run says so, its files' modification time, named as such ("files modified 2026-11-28 17:23").
 */
export function runDateLabel(run: IRun): string {
  const when = (run.date ?? '').replace('T', ' ').slice(0, 16);
  return run.date_source === 'file time' ? `files modified ${when}` : `profiled ${when}`;
}

/** The tooltip line saying where a run's date comes from. */
export function runDateTitle(run: IRun): string {
  const when = (run.date ?? '').replace('T', ' ');
  if (run.date_source === 'file time') {
    return `Files last modified ${when} (no profiling time found in the run)`;
  }
  return `Profiled ${when} (from the ${run.date_source ?? 'run'})`;
}

export class RunsPanel extends Widget {
  constructor(options: RunsPanel.IOptions) {
    super();
    this._browser = options.browser;
    this._openRun = options.openRun;
    this.id = 'nbprofiler-runs';
    this.addClass('jp-nbprofiler-RunsPanel');
    this.title.icon = profilerIcon;
    this.title.caption = 'Profiler runs';

    const header = document.createElement('div');
    header.className = 'jp-nbprofiler-RunsPanel-header';
    const title = document.createElement('h2');
    title.textContent = 'Profiler runs';
    const refresh = document.createElement('button');
    refresh.className = 'jp-nbprofiler-RunsPanel-refresh jp-mod-styled';
    refresh.textContent = 'Refresh';
    refresh.title = 'Search the current folder again';
    refresh.addEventListener('click', () => void this.refresh());
    header.append(title, refresh);

    this._folder = document.createElement('div');
    this._folder.className = 'jp-nbprofiler-RunsPanel-folder';
    this._status = document.createElement('div');
    this._status.className = 'jp-nbprofiler-RunsPanel-status';
    this._list = document.createElement('ul');
    this._list.className = 'jp-nbprofiler-RunsPanel-list';
    this.node.append(header, this._folder, this._status, this._list);

    this._browser.model.pathChanged.connect(this._onPathChanged, this);
  }

  /** Search the file browser's current folder and show what was found. */
  async refresh(): Promise<void> {
    const folder = this._browser.model.path;
    const ticket = ++this._ticket;
    this._stale = false;
    this._folder.textContent = `in /${folder}`;
    this._folder.title = `/${folder}`;
    this._status.textContent = 'Searching…';
    this.node.dataset.state = 'searching';
    this._list.replaceChildren();
    try {
      const result = await listRuns(folder);
      if (ticket !== this._ticket) {
        return; // the user moved on to another folder meanwhile
      }
      this._render(result.runs);
    } catch (reason) {
      if (ticket !== this._ticket) {
        return;
      }
      this._status.textContent = `Could not search this folder: ${
        (reason as Error).message ?? reason
      }`;
      this.node.dataset.state = 'error';
    }
  }

  dispose(): void {
    if (!this.isDisposed) {
      this._browser.model.pathChanged.disconnect(this._onPathChanged, this);
    }
    super.dispose();
  }

  protected onAfterShow(): void {
    if (this._stale) {
      void this.refresh();
    }
  }

  private _onPathChanged(): void {
    // Only search when the panel is visible; otherwise do it the next time it is shown.
    this._stale = true;
    if (this.isVisible) {
      void this.refresh();
    }
  }

  private _render(runs: IRun[]): void {
    this.node.dataset.state = 'done';
    this._status.textContent =
      runs.length === 0
        ? 'No profiler runs in this folder.'
        : `${runs.length} run${runs.length === 1 ? '' : 's'} found. Click one to open a report.`;
    const items = runs.map(run => {
      const item = document.createElement('li');
      item.className = 'jp-nbprofiler-Run';
      const button = document.createElement('button');
      button.className = 'jp-nbprofiler-Run-open';
      button.dataset.path = run.path;
      button.dataset.device = run.device;
      button.title =
        `Open a report for /${run.path} (device ${run.device})` +
        (run.date ? `\n${runDateTitle(run)}` : '');
      const name = document.createElement('span');
      name.className = 'jp-nbprofiler-Run-name';
      name.textContent = run.name;
      const meta = document.createElement('span');
      meta.className = 'jp-nbprofiler-Run-meta';
      // the device in the run's own folder (what the report opens); the entry's name tells runs apart
      const parts = [run.generation, `device ${run.device}`];
      if (run.date) {
        parts.push(runDateLabel(run));
      }
      parts.push(`${run.files} file${run.files === 1 ? '' : 's'}`);
      meta.textContent = parts.join(' · ');
      button.append(name, meta);
      button.addEventListener('click', async () => {
        button.disabled = true;
        try {
          await this._openRun(run);
        } finally {
          button.disabled = false;
        }
      });
      item.append(button);
      return item;
    });
    this._list.replaceChildren(...items);
  }

  private _browser: FileBrowser;
  private _openRun: (run: IRun) => Promise<void>;
  private _folder: HTMLElement;
  private _status: HTMLElement;
  private _list: HTMLElement;
  private _ticket = 0;
  private _stale = true;
}

export namespace RunsPanel {
  export interface IOptions {
    /** The file browser whose current folder is searched. */
    browser: FileBrowser;
    /** Open (create and run) a report for a run. */
    openRun: (run: IRun) => Promise<void>;
  }
}
