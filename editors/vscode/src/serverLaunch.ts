// Which command starts `piflow serve`, from the settings, PATH and the workspace's virtualenv;
// or the message that tells the user how to fix it.

import * as path from "node:path";

export const NOT_INSTALLED = "piflow is not installed: run `pip install piflow` or set piflow.server.command";

export interface ServerSettings {
  /** The whole command, e.g. `["/opt/piflow/bin/piflow", "serve"]`; empty to use the default. */
  command: string[];
  /** A Python interpreter that has piflow installed; used when `command` is empty. */
  pythonPath: string;
}

export interface LaunchEnvironment {
  platform: NodeJS.Platform;
  /** The PATH variable. */
  searchPath: string;
  home: string;
  workspaceFolders: string[];
  /** A workspace's own files (its virtualenv) are run only when the workspace is trusted. */
  trusted: boolean;
  isExecutable(file: string): boolean;
  /** Whether `python -c "import piflow"` succeeds. */
  hasPiflowModule(python: string): boolean;
}

export type Launch = { ok: true; command: string; args: string[] } | { ok: false; message: string };

/** `${workspaceFolder}` and a leading `~` in settings values. */
export function expand(value: string, env: Pick<LaunchEnvironment, "home" | "workspaceFolders">): string {
  const folder = env.workspaceFolders[0] ?? "";
  const replaced = value.replace(/\$\{workspaceFolder\}/g, folder);
  return replaced === "~" || replaced.startsWith("~/") ? env.home + replaced.slice(1) : replaced;
}

function hasDirectory(file: string): boolean {
  return file.includes("/") || file.includes("\\");
}

function pathApi(platform: NodeJS.Platform): path.PlatformPath {
  return platform === "win32" ? path.win32 : path.posix;
}

/** Resolves a bare name through PATH (and PATHEXT-style suffixes on Windows); a path must exist. */
export function findExecutable(name: string, env: LaunchEnvironment): string | undefined {
  const paths = pathApi(env.platform);
  if (hasDirectory(name)) {
    const file = paths.isAbsolute(name) ? name : paths.resolve(env.workspaceFolders[0] ?? env.home, name);
    return env.isExecutable(file) ? file : undefined;
  }
  const suffixes = env.platform === "win32" ? [".exe", ".cmd", ".bat", ""] : [""];
  for (const dir of env.searchPath.split(env.platform === "win32" ? ";" : ":")) {
    if (!dir) continue;
    for (const suffix of suffixes) {
      const file = paths.join(dir, name + suffix);
      if (env.isExecutable(file)) return file;
    }
  }
  return undefined;
}

function virtualenvPiflow(folder: string, platform: NodeJS.Platform): string {
  const paths = pathApi(platform);
  return platform === "win32"
    ? paths.join(folder, ".venv", "Scripts", "piflow.exe")
    : paths.join(folder, ".venv", "bin", "piflow");
}

export function resolveLaunch(settings: ServerSettings, env: LaunchEnvironment): Launch {
  const [program, ...rest] = settings.command.map((part) => expand(part, env));
  if (program) {
    const command = findExecutable(program, env);
    if (!command) {
      return {
        ok: false,
        message: `piflow.server.command: \`${program}\` was not found. Fix the setting, or clear it to use piflow from PATH.`,
      };
    }
    return { ok: true, command, args: rest };
  }
  const python = settings.pythonPath ? expand(settings.pythonPath, env) : "";
  if (python) {
    const command = findExecutable(python, env);
    if (!command) return { ok: false, message: `piflow.server.pythonPath: \`${python}\` was not found.` };
    if (!env.hasPiflowModule(command)) {
      return {
        ok: false,
        message: `piflow is not installed for ${command}: run \`${command} -m pip install piflow\` or set piflow.server.command`,
      };
    }
    return { ok: true, command, args: ["-m", "piflow", "serve"] };
  }
  const onPath = findExecutable("piflow", env);
  if (onPath) return { ok: true, command: onPath, args: ["serve"] };
  if (env.trusted) {
    for (const folder of env.workspaceFolders) {
      const candidate = virtualenvPiflow(folder, env.platform);
      if (env.isExecutable(candidate)) return { ok: true, command: candidate, args: ["serve"] };
    }
  }
  return { ok: false, message: NOT_INSTALLED };
}
