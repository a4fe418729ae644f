/**
 * nbprofiler JupyterLab extension.
 *
 * - File browser context menu on folders and JSON files: "Open in nbprofiler" (report next to the
 *   profiler output) and "Open in nbprofiler in…" (the user picks the report's folder).
 * - Launcher card and palette: "New profiler report" (path and "Save report in" dialog),
 *   "Open profiler report..." (file dialog).
 * - Left sidebar: profiler runs under the file browser's current folder (server-side discovery).
 * - `nbprofiler:open-source` (args `path`, `line`): open a file of a profiled call stack in the editor at
 *   that line; the "Open" links of nbprofiler's Source panel run it (see source.ts).
 *
 * A report is a notebook written by the server extension next to the profiler folder or in a folder
 * the user chose, never inside profiler output (the server refuses such a folder with a 409 whose
 * message is shown as is); this side opens it and runs all cells.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import {
  FileDialog,
  IDefaultFileBrowser,
  IFileBrowserFactory
} from '@jupyterlab/filebrowser';
import { PathExt } from '@jupyterlab/coreutils';
import { ILauncher } from '@jupyterlab/launcher';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { createReport, IRun, suggestedReportDir } from './api';
import { profilerIcon } from './icon';
import { IReportChoice, ReportBody } from './reportdialog';
import { RunsPanel } from './sidebar';
import { listenForSourceLinks, openSource } from './source';

export namespace CommandIDs {
  export const openInNbprofiler = 'nbprofiler:open-in-nbprofiler';
  export const openInNbprofilerIn = 'nbprofiler:open-in-nbprofiler-in';
  export const newReport = 'nbprofiler:new-report';
  export const openReport = 'nbprofiler:open-report';
  export const openRun = 'nbprofiler:open-run';
  export const showRuns = 'nbprofiler:show-runs';
  export const openSource = 'nbprofiler:open-source';
}

const PALETTE_CATEGORY = 'nbprofiler';

/** The server refused the chosen folder because it is inside profiler output. */
function isRefusedFolder(reason: unknown): boolean {
  return reason instanceof ServerConnection.ResponseError && reason.response.status === 409;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'nbprofiler:plugin',
  description: 'Open MindSpore profiler output as nbprofiler report notebooks.',
  autoStart: true,
  requires: [IDefaultFileBrowser, IFileBrowserFactory, IDocumentManager],
  optional: [ICommandPalette, ILauncher, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    defaultBrowser: IDefaultFileBrowser,
    factory: IFileBrowserFactory,
    docManager: IDocumentManager,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    restorer: ILayoutRestorer | null
  ) => {
    const { commands } = app;

    /** Create the report notebook, open it and run all its cells. */
    async function openReport(
      path: string,
      device?: string,
      dir?: string
    ): Promise<NotebookPanel | null> {
      let reportPath: string;
      try {
        reportPath = (await createReport({ path, device, dir })).path;
      } catch (reason) {
        await showErrorMessage(
          isRefusedFolder(reason)
            ? 'nbprofiler: choose another folder for the report'
            : 'nbprofiler: cannot create the report',
          reason as Error
        );
        return null;
      }
      return runReport(reportPath);
    }

    /** Open a report notebook written by the server and run all its cells. */
    async function runReport(reportPath: string): Promise<NotebookPanel | null> {
      const widget = await commands.execute('docmanager:open', {
        path: reportPath,
        factory: 'Notebook'
      });
      if (!(widget instanceof NotebookPanel)) {
        return null;
      }
      await widget.context.ready;
      await widget.sessionContext.ready;
      await NotebookActions.runAll(widget.content, widget.sessionContext);
      return widget;
    }

    /** The item right-clicked in a file browser (the selection), else that browser's folder. */
    function contextTarget(): { path: string; isDir: boolean } {
      const browser = factory.tracker.currentWidget ?? defaultBrowser;
      const item = browser.selectedItems().next();
      if (!item.done && item.value) {
        return { path: item.value.path, isDir: item.value.type === 'directory' };
      }
      return { path: browser.model.path, isDir: true };
    }

    /** Folders and trace JSON files are what nbprofiler can open. */
    function isProfilerTarget(): boolean {
      const target = contextTarget();
      return target.isDir || target.path.toLowerCase().endsWith('.json');
    }

    commands.addCommand(CommandIDs.openInNbprofiler, {
      label: 'Open in nbprofiler',
      caption: 'Create a report notebook for this profiler output (next to it), open it and run it',
      icon: profilerIcon,
      isVisible: isProfilerTarget,
      execute: async args => {
        const path = (args.path as string | undefined) ?? contextTarget().path;
        return openReport(path, args.device as string | undefined);
      }
    });

    /**
     * Ask for the report's folder (starting at the server's suggestion), then create and run it.
     * A folder inside profiler output is refused by the server: say why and offer another pick.
     */
    async function openReportIn(path: string, device?: string): Promise<NotebookPanel | null> {
      let start: string;
      try {
        start = await suggestedReportDir(path);
      } catch {
        start = PathExt.dirname(path); // e.g. the root is profiler output: the user must pick
      }
      for (;;) {
        const picked = await FileDialog.getExistingDirectory({
          manager: docManager,
          title: 'Save the nbprofiler report in',
          label: `Folder for the report notebook of /${path} (not inside profiler output):`,
          defaultPath: start
        });
        if (!picked.button.accept || !picked.value || picked.value.length === 0) {
          return null;
        }
        const dir = picked.value[0].path;
        let reportPath: string;
        try {
          reportPath = (await createReport({ path, device, dir })).path;
        } catch (reason) {
          if (!isRefusedFolder(reason)) {
            await showErrorMessage('nbprofiler: cannot create the report', reason as Error);
            return null;
          }
          const again = await showDialog({
            title: 'nbprofiler: choose another folder for the report',
            body: (reason as Error).message,
            buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Choose another folder' })]
          });
          if (!again.button.accept) {
            return null;
          }
          continue;
        }
        return runReport(reportPath);
      }
    }

    commands.addCommand(CommandIDs.openInNbprofilerIn, {
      label: 'Open in nbprofiler in…',
      caption: 'Choose a folder for the report notebook of this profiler output, then open it and run it',
      icon: profilerIcon,
      isVisible: isProfilerTarget,
      execute: async args => {
        const path = (args.path as string | undefined) ?? contextTarget().path;
        return openReportIn(path, args.device as string | undefined);
      }
    });

    commands.addCommand(CommandIDs.newReport, {
      label: 'New profiler report',
      caption: 'Create a report notebook for a profiler output folder or trace JSON file',
      icon: args => (args.isPalette ? undefined : profilerIcon),
      execute: async args => {
        // The launcher passes its own folder as `cwd`; elsewhere use the file browser's folder.
        const start = (args.cwd as string | undefined) ?? defaultBrowser.model.path;
        const result = await showDialog<IReportChoice>({
          title: 'New profiler report',
          body: new ReportBody(start),
          buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Create report' })],
          focusNodeSelector: 'input'
        });
        if (!result.button.accept || result.value === null) {
          return null;
        }
        return openReport(result.value.path, undefined, result.value.dir);
      }
    });

    commands.addCommand(CommandIDs.openReport, {
      label: 'Open profiler report…',
      caption: 'Pick a profiler output folder or trace JSON file and open its report',
      icon: args => (args.isPalette ? undefined : profilerIcon),
      execute: async () => {
        const result = await FileDialog.getOpenFiles({
          manager: docManager,
          title: 'Open profiler report',
          label: 'Select a profiler output folder or a trace JSON file:',
          defaultPath: defaultBrowser.model.path,
          filter: model =>
            model.type === 'directory' || model.name.toLowerCase().endsWith('.json')
              ? {}
              : null
        });
        if (!result.button.accept || !result.value || result.value.length === 0) {
          return null;
        }
        return openReport(result.value[0].path);
      }
    });

    commands.addCommand(CommandIDs.openRun, {
      label: 'Open profiler run',
      execute: args => openReport(args.path as string, args.device as string | undefined)
    });

    const panel = new RunsPanel({
      browser: defaultBrowser,
      openRun: async (run: IRun) => {
        // Pick the device only when the folder holds several; a single-run folder loads as is.
        const device = run.devices_in_folder.length > 1 ? run.device : undefined;
        await openReport(run.path, device);
      }
    });
    app.shell.add(panel, 'left', { rank: 650 });
    if (restorer) {
      restorer.add(panel, 'nbprofiler-runs');
    }

    commands.addCommand(CommandIDs.showRuns, {
      label: 'Show profiler runs',
      caption: 'Show the profiler runs under the current folder',
      execute: () => {
        app.shell.activateById(panel.id);
        return panel.refresh();
      }
    });

    commands.addCommand(CommandIDs.openSource, {
      label: 'Open source file at line',
      caption: 'Open a file of a profiled call stack in the editor, the cursor on the line (args: path, line)',
      execute: args => openSource(docManager, args.path as string, Number(args.line ?? 1))
    });
    listenForSourceLinks(commands, CommandIDs.openSource);

    app.contextMenu.addItem({
      command: CommandIDs.openInNbprofiler,
      selector: '.jp-DirListing-item[data-isdir="true"]',
      rank: 3
    });
    app.contextMenu.addItem({
      command: CommandIDs.openInNbprofiler,
      selector: '.jp-DirListing-item[data-file-type="json"]',
      rank: 3
    });
    for (const selector of [
      '.jp-DirListing-item[data-isdir="true"]',
      '.jp-DirListing-item[data-file-type="json"]'
    ]) {
      app.contextMenu.addItem({ command: CommandIDs.openInNbprofilerIn, selector, rank: 3.1 });
    }

    for (const command of [CommandIDs.newReport, CommandIDs.openReport, CommandIDs.showRuns]) {
      palette?.addItem({ command, category: PALETTE_CATEGORY });
    }
    launcher?.add({ command: CommandIDs.newReport, category: 'Other', rank: 1 });

    console.log('nbprofiler extension activated');
  }
};

export default plugin;
