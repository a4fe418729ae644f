/**
 * Calls to nbprofiler's Jupyter server extension (nbprofiler/faces/lab.py).
 *
 * Paths are Jupyter "API paths": relative to the server root, '/'-separated, as the
 * file browser and the contents API use them.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** One profiler run found by server-side discovery (GET /nbprofiler/runs). */
export interface IRun {
  /** API path of the folder (or trace file) the run lives in. */
  path: string;
  /** Path shown to the user: relative to the folder that was searched. */
  name: string;
  /** "legacy", "mindspore2", "database", "minddata", "cann", "cluster_analysis", "trace" or "metadata". */
  generation: string;
  /** Device or rank id as written in the file names ("*" for a cluster_analysis_output folder). */
  device: string;
  /** Other devices/ranks found in the same folder (a report for this run picks `device`). */
  devices_in_folder: string[];
  /** Session (e.g. the *_ascend_ms folder name), may be empty. */
  session: string;
  /** How the searched folder names this run: the rank, or "<rank>@<session>" for a later session. */
  key?: string;
  /**
   * ISO-8601 local time the run was profiled (its folder name's timestamp, profiler_info, database or
   * CANN start_info), else its newest file's modification time; null when none could be read.
   */
  date: string | null;
  /** Where `date` comes from: "folder name", "profiler_info", "database", "start_info", or "file time". */
  date_source?: string | null;
  /** Number of profiler files that belong to the run. */
  files: number;
}

export interface IRunList {
  /** The folder that was searched (API path). */
  path: string;
  runs: IRun[];
}

export interface IReport {
  /** API path of the new report notebook. */
  path: string;
  /** The profiler path written into the notebook, relative to the notebook's folder. */
  profile_path: string;
}

async function request<T>(
  endpoint: string,
  init: RequestInit = {},
  query?: Record<string, string>
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  let url = URLExt.join(settings.baseUrl, 'nbprofiler', endpoint);
  if (query) {
    url += URLExt.objectToQueryString(query);
  }
  const response = await ServerConnection.makeRequest(url, init, settings);
  const text = await response.text();
  let data: any = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { message: text };
    }
  }
  if (!response.ok) {
    const message =
      (data && (data.message || data.reason)) ||
      `${response.status} ${response.statusText}`;
    throw new ServerConnection.ResponseError(response, message);
  }
  return data as T;
}

/** Profiler runs under a folder; discovery runs in a server thread. */
export function listRuns(path: string): Promise<IRunList> {
  return request<IRunList>('runs', { method: 'GET' }, { path });
}

/**
 * The folder a report for `path` goes into when no `dir` is chosen (API path, '' for the root).
 *
 * Rejects (409) when there is no such place: the Jupyter root itself is profiler output.
 */
export async function suggestedReportDir(path: string): Promise<string> {
  return (await request<{ path: string; dir: string }>('report-dir', { method: 'GET' }, { path })).dir;
}

/**
 * Create a report notebook for profiler output at `path`.
 *
 * The server places it next to the profiler folder (never inside one) unless
 * `dir` is given, and refuses (409, with a message for the user) a `dir` inside profiler output.
 */
export function createReport(options: {
  path: string;
  device?: string;
  dir?: string;
}): Promise<IReport> {
  return request<IReport>('report', {
    method: 'POST',
    body: JSON.stringify(options)
  });
}
