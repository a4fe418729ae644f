/**
 * "Source one click away": open a Python file of a profiled call stack in JupyterLab's editor at a line.
 *
 * nbprofiler's Source panel (an ipywidgets HTML or a Bokeh Div) writes an "Open" link with the class
 * `OPEN_SOURCE_CLASS` and the file (an absolute path on the server's machine) and line in `data-path` and
 * `data-line`. A click anywhere in the page on such a link runs the `nbprofiler:open-source` command
 * (`listenForSourceLinks`); the link's href is "#", so without this extension nothing happens.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { showErrorMessage } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import { IDocumentManager } from '@jupyterlab/docmanager';

export const OPEN_SOURCE_CLASS = 'nbprofiler-open-source';

/** The part of a code editor the command uses (the file editor's `CodeEditor.IEditor`). */
interface IPositionEditor {
  setCursorPosition(position: { line: number; column: number }): void;
  revealPosition?(position: { line: number; column: number }): void;
  focus?(): void;
}

/**
 * The contents-API path (relative to the server root, "/"-separated) of an absolute file path, or null
 * where the file is not under the root (JupyterLab opens nothing outside it).
 */
export function apiPath(path: string, serverRoot: string): string | null {
  const norm = (p: string) => p.replace(/\\/g, '/').replace(/\/+$/, '');
  const file = norm(path);
  const root = norm(serverRoot);
  if (!file.startsWith('/') && !/^[A-Za-z]:\//.test(file)) {
    return null; // a relative path names no file the server can place
  }
  if (root === '') {
    return file.replace(/^\/+/, ''); // the root is "/"
  }
  if (file === root || !file.startsWith(root + '/')) {
    return null;
  }
  const rel = file.slice(root.length + 1);
  return rel.split('/').some(part => part === '..') ? null : rel;
}

/** Open `path` (absolute) in the file editor with the cursor at `line` (1-based). */
export async function openSource(
  docManager: IDocumentManager,
  path: string,
  line: number
): Promise<boolean> {
  const root = PageConfig.getOption('serverRoot');
  const rel = apiPath(path, root);
  if (rel === null) {
    await showErrorMessage(
      'nbprofiler: cannot open the source file',
      `${path} is not under the Jupyter server's root folder (${root}), so JupyterLab cannot open it. ` +
        'The call stack in the panel shows where the call came from.'
    );
    return false;
  }
  try {
    const widget = docManager.openOrReveal(rel, 'Editor') ?? docManager.openOrReveal(rel);
    if (!widget) {
      throw new Error(`no editor can open ${rel}`);
    }
    await widget.context.ready;
    const editor = (widget.content as unknown as { editor?: IPositionEditor }).editor;
    if (editor) {
      const position = { line: Math.max(0, Math.floor(line) - 1), column: 0 };
      editor.setCursorPosition(position);
      editor.revealPosition?.(position);
      editor.focus?.();
    }
    return true;
  } catch (reason) {
    await showErrorMessage('nbprofiler: cannot open the source file', reason as Error);
    return false;
  }
}

/**
 * Run `command` for every click on an "Open" link of a Source panel. The panel may sit in a shadow root
 * (Bokeh), where the document sees the host as the click's target: the link is looked for along the
 * event's composed path.
 */
export function listenForSourceLinks(commands: JupyterFrontEnd['commands'], command: string): void {
  document.addEventListener(
    'click',
    (event: MouseEvent) => {
      const link = event
        .composedPath()
        .find(
          (node): node is HTMLElement =>
            node instanceof HTMLElement && node.classList.contains(OPEN_SOURCE_CLASS)
        );
      if (!link) {
        return;
      }
      event.preventDefault();
      event.stopPropagation();
      const path = link.dataset.path;
      const line = Number(link.dataset.line);
      if (path) {
        void commands.execute(command, { path, line: Number.isFinite(line) && line > 0 ? line : 1 });
      }
    },
    true
  );
}
