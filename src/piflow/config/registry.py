"""pi's model registry `<agentDir>/models.json`: which models exist, which are usable, what they cost.

The file is pi's own (`providers.<name>.{baseUrl, api, apiKey, headers, models[...]}`), so a
pi user's custom providers work in piflow unchanged. piflow only reads it. Unknown keys are
accepted (pi adds fields such as `compat` or `modelOverrides`); the keys piflow uses are
checked and a wrong one is a CONFIG_ERROR naming the file, line and column.

Availability rule (pi resolves credentials lazily; piflow must decide up front which models a
script may use without spending anything):

- `apiKey` `"!command"` — available (the command runs only when a key is actually needed);
- `apiKey` `"$VAR"` / `"${VAR}"` — available when `VAR` is set and non-empty;
- `apiKey` shaped like an environment variable name (`OPENAI_API_KEY`) — pi uses the
  variable when it is set and the literal otherwise; piflow calls the provider available only
  when the variable is set, because sending a variable's name as a key can only fail later;
- any other `apiKey` — a literal key: available;
- no `apiKey` — available when `<PROVIDER>_API_KEY` is set or `baseUrl` is a loopback address
  (a local server such as Ollama or llama.cpp needs no key).

`known_models` lists every configured model, available or not, for bare-id resolution.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from piflow.config.files import FileRefused, node_error_text, read_text_as_node
from piflow.config.json_text import JsonDocument, JsonSyntaxError, parse_json_document
from piflow.errors import WorkflowError
from piflow.jsvalues import is_js_integer, is_json_number

__all__ = [
    "ModelCost", "ModelRegistry", "ProviderConfig", "RegistryModel", "load_model_registry", "pi_schema_problems"
]

_ENV_NAME: Final = re.compile(r"[A-Z_][A-Z0-9_]*")
_ENV_REFERENCE: Final = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
_INPUT_KINDS: Final = frozenset({"text", "image"})
_COMMAND_TIMEOUT_SECONDS: Final = 30

JsonPath = tuple[str | int, ...]


@dataclass(frozen=True)
class ModelCost:
    """Prices in USD per million tokens, as pi's `cost` table."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    def usd(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        """The cost of one call's token counts."""
        return (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_read * self.cache_read
            + cache_write * self.cache_write
        ) / 1_000_000

    def to_json(self) -> dict[str, float]:
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
        }


@dataclass(frozen=True)
class RegistryModel:
    """One configured model; `ref` is the `provider/id` scripts use."""

    provider: str
    id: str
    name: str
    api: str | None
    reasoning: bool = False
    input: tuple[str, ...] = ("text",)
    context_window: int | None = None
    max_tokens: int | None = None
    cost: ModelCost = field(default_factory=ModelCost)
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.id}"


@dataclass(frozen=True)
class ProviderConfig:
    """A provider entry; `api_key` is the raw configured value (see `ModelRegistry.api_key`)."""

    name: str
    base_url: str | None = None
    api: str | None = None
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    auth_header: bool = False
    models: tuple[RegistryModel, ...] = ()


@dataclass(frozen=True)
class ModelRegistry:
    """The parsed registry. `configured` is False when the file does not exist."""

    path: Path | None = None
    configured: bool = False
    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    document: JsonDocument | None = field(default=None, repr=False, compare=False)

    @property
    def known_models(self) -> list[str]:
        """Every configured `provider/id`, in file order."""
        return [model.ref for provider in self.providers.values() for model in provider.models]

    @property
    def available_models(self) -> list[str]:
        """`provider/id` of models whose provider is usable (see the module docstring)."""
        return [
            model.ref
            for provider in self.providers.values()
            if self.provider_available(provider.name)
            for model in provider.models
        ]

    @property
    def pi_error(self) -> str | None:
        """What pi says of this file when it refuses it (pi then ignores every model in it), or None."""
        if self.document is None:
            return None
        problems = pi_schema_problems(self.document.value)
        if not problems:
            return None
        lines = "\n".join(f"  - {problem}" for problem in problems)
        return f"Invalid models.json schema:\n{lines}\n\nFile: {self.path}"

    def provider(self, name: str) -> ProviderConfig | None:
        return self.providers.get(name)

    def model(self, ref: str) -> RegistryModel | None:
        """The model named `provider/id` (the id may itself contain `/`)."""
        provider_name, _, model_id = ref.partition("/")
        provider = self.providers.get(provider_name)
        if provider is None:
            return None
        return next((model for model in provider.models if model.id == model_id), None)

    def cost(self, ref: str) -> ModelCost | None:
        model = self.model(ref)
        return None if model is None else model.cost

    def provider_available(self, name: str) -> bool:
        return name in self.providers and self.missing_key_variable(name) is None

    def missing_key_variable(self, name: str) -> str | None:
        """The unset environment variable a configured provider's key comes from (None: usable).

        Naming the variable lets a finding say what to set instead of calling the model unknown.
        """
        provider = self.providers.get(name)
        if provider is None:
            return None
        key = provider.api_key
        if key is None or key == "":
            variable = _default_key_variable(name)
            return None if self.environ.get(variable) or _is_loopback(provider.base_url) else variable
        if key.startswith("!"):
            return None
        reference = _ENV_REFERENCE.fullmatch(key)
        variable = (reference.group(1) or reference.group(2)) if reference else key
        if (reference or _ENV_NAME.fullmatch(key)) and not self.environ.get(variable):
            return variable
        return None

    def api_key(self, name: str) -> str | None:
        """Resolve a provider's key as pi does: `!command` output, an environment variable's
        value when the string names a set variable, else the literal. None when there is none."""
        provider = self.providers.get(name)
        if provider is None:
            return None
        key = provider.api_key
        if not key:
            return self.environ.get(_default_key_variable(name)) or None
        if key.startswith("!"):
            return _run_key_command(name, key[1:])
        reference = _ENV_REFERENCE.fullmatch(key)
        if reference:
            return self.environ.get(reference.group(1) or reference.group(2)) or None
        return self.environ.get(key) or key


def _default_key_variable(provider: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", provider).upper() + "_API_KEY"


def _is_loopback(base_url: str | None) -> bool:
    if not base_url:
        return False
    try:
        host = urlsplit(base_url).hostname
    except ValueError:
        return False
    return host is not None and (host in _LOOPBACK_HOSTS or host.startswith("127."))


def _run_key_command(provider: str, command: str) -> str:
    try:
        completed = subprocess.run(
            command, shell=True, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        message = f"apiKey command of provider {provider} failed: {error}"
        raise WorkflowError("CONFIG_ERROR", message) from None
    if completed.returncode != 0:
        raise WorkflowError(
            "CONFIG_ERROR", f"apiKey command of provider {provider} exited with code {completed.returncode}"
        )
    return completed.stdout.strip()


class _Reader:
    """Checks the registry shape, reporting the location of the offending value."""

    def __init__(self, path: str, document: JsonDocument) -> None:
        self.path = path
        self.document = document

    def error(self, json_path: JsonPath, what: str) -> WorkflowError:
        location = self.document.location(json_path)
        where = f"{self.path}:{location.line}:{location.column}" if location else self.path
        return WorkflowError("CONFIG_ERROR", f"{where}: {what}")

    def invalid(self, json_path: JsonPath, what: str) -> WorkflowError:
        """`<file>:<line>:<col>: <dotted path> <what>` for the value at `json_path`."""
        return self.error(json_path, f"{_dotted(json_path)} {what}")

    def object(self, value: Any, json_path: JsonPath, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(json_path, f"{what} must be an object")
        return value

    def optional_string(self, entry: dict[str, Any], key: str, json_path: JsonPath) -> str | None:
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise self.invalid((*json_path, key), "must be a string")
        return value

    def headers(self, entry: dict[str, Any], json_path: JsonPath) -> dict[str, str]:
        headers = entry.get("headers")
        if headers is None:
            return {}
        checked = self.object(headers, (*json_path, "headers"), _dotted(json_path, "headers"))
        for name, value in checked.items():
            if not isinstance(value, str):
                raise self.invalid((*json_path, "headers", name), "must be a string")
        return dict(checked)

    def providers(self, root: Any) -> dict[str, ProviderConfig]:
        entries = self.object(root, (), "the model registry")
        providers_value = entries.get("providers")
        if providers_value is None:
            return {}
        providers = self.object(providers_value, ("providers",), "providers")
        return {name: self.provider(name, value) for name, value in providers.items()}

    def provider(self, name: str, value: Any) -> ProviderConfig:
        json_path: JsonPath = ("providers", name)
        entry = self.object(value, json_path, _dotted(json_path))
        base_url = self.optional_string(entry, "baseUrl", json_path)
        api = self.optional_string(entry, "api", json_path)
        api_key = self.optional_string(entry, "apiKey", json_path)
        auth_header = entry.get("authHeader", False)
        if not isinstance(auth_header, bool):
            raise self.invalid((*json_path, "authHeader"), "must be a boolean")
        models_value = entry.get("models")
        models: dict[str, RegistryModel] = {}
        if models_value is not None:
            if not isinstance(models_value, list):
                raise self.invalid((*json_path, "models"), "must be an array")
            if models_value and not base_url:
                raise self.invalid(json_path, "needs a baseUrl when it defines models")
            for index, model_value in enumerate(models_value):
                model = self.model(name, api, model_value, (*json_path, "models", index))
                models[model.id] = model  # pi upserts by id: a later entry replaces an earlier one
        return ProviderConfig(
            name, base_url, api, api_key, self.headers(entry, json_path), auth_header, tuple(models.values())
        )

    def model(
        self, provider: str, provider_api: str | None, value: Any, json_path: JsonPath
    ) -> RegistryModel:
        entry = self.object(value, json_path, _dotted(json_path))
        model_id = entry.get("id")
        if not isinstance(model_id, str) or not model_id.strip():
            raise self.invalid((*json_path, "id"), "must be a non-empty string")
        name = self.optional_string(entry, "name", json_path) or model_id
        api = self.optional_string(entry, "api", json_path) or provider_api
        if api is None:
            raise self.invalid(json_path, "needs an api (on the model or its provider)")
        reasoning = entry.get("reasoning", False)
        if not isinstance(reasoning, bool):
            raise self.invalid((*json_path, "reasoning"), "must be a boolean")
        inputs = entry.get("input", ["text"])
        if not isinstance(inputs, list) or any(kind not in _INPUT_KINDS for kind in inputs):
            raise self.invalid((*json_path, "input"), 'must be an array of "text" or "image"')
        return RegistryModel(
            provider=provider,
            id=model_id,
            name=name,
            api=api,
            reasoning=reasoning,
            input=tuple(inputs),
            context_window=self.positive_integer(entry, "contextWindow", json_path),
            max_tokens=self.positive_integer(entry, "maxTokens", json_path),
            cost=self.cost(entry.get("cost"), (*json_path, "cost")),
            headers=self.headers(entry, json_path),
        )

    def positive_integer(self, entry: dict[str, Any], key: str, json_path: JsonPath) -> int | None:
        value = entry.get(key)
        if value is None:
            return None
        if not is_js_integer(value) or value <= 0:
            raise self.invalid((*json_path, key), "must be a positive integer")
        return int(value)

    def cost(self, value: Any, json_path: JsonPath) -> ModelCost:
        if value is None:
            return ModelCost()
        entry = self.object(value, json_path, _dotted(json_path))
        prices: dict[str, float] = {}
        for key in ("input", "output", "cacheRead", "cacheWrite"):
            price = entry.get(key, 0)
            if not is_json_number(price) or price < 0:
                raise self.invalid((*json_path, key), "must be a non-negative number")
            prices[key] = float(price)
        return ModelCost(prices["input"], prices["output"], prices["cacheRead"], prices["cacheWrite"])


def _dotted(json_path: JsonPath, *more: str | int) -> str:
    text = ""
    for step in (*json_path, *more):
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


# -- pi's own check ---------------------------------------------------------------------------
# pi (0.80, `dist/core/model-config.js`) checks models.json against a TypeBox schema and, when it
# fails, drops every custom model and reports at most eight lines of `  - <dotted path>: <message>`.
# The schema below is that schema, field by field and in its order (the order of pi's lines).
# Unknown keys are allowed by pi's schema, as here.

_PI_ERROR_CAP: Final = 8
_Shape = tuple[Any, ...]
_STRING: Final[_Shape] = ("string", 0)
_NAME: Final[_Shape] = ("string", 1)
_NUMBER: Final[_Shape] = ("number",)
_BOOLEAN: Final[_Shape] = ("boolean",)
_STRING_MAP: Final[_Shape] = ("record", _STRING)
_INPUTS: Final[_Shape] = ("array", ("anyOf", (("const", "text"), ("const", "image"))))
_RATES: Final = (("input", _NUMBER, True), ("output", _NUMBER, True), ("cacheRead", _NUMBER, True),
                 ("cacheWrite", _NUMBER, True))
_TIER: Final[_Shape] = ("object", (("inputTokensAbove", _NUMBER, True), *_RATES))
_COST: Final[_Shape] = ("object", (*_RATES, ("tiers", ("array", _TIER), False)))
_COST_OVERRIDE: Final[_Shape] = ("object", (*((key, shape, False) for key, shape, _ in _RATES),
                                            ("tiers", ("array", _TIER), False)))
_THINKING_MAP: Final[_Shape] = ("object", tuple(
    (level, ("anyOf", (_STRING, ("null",))), False)
    for level in ("off", "minimal", "low", "medium", "high", "xhigh", "max")
))
_COMPAT: Final[_Shape] = ("object", ())  # a union of objects whose every key is optional
_MODEL_FIELDS: Final = (
    ("name", _NAME, False), ("reasoning", _BOOLEAN, False), ("thinkingLevelMap", _THINKING_MAP, False),
    ("input", _INPUTS, False),
)
_MODEL: Final[_Shape] = ("object", (
    ("id", _NAME, True), ("name", _NAME, False), ("api", _NAME, False), ("baseUrl", _NAME, False),
    *_MODEL_FIELDS[1:], ("cost", _COST, False), ("contextWindow", _NUMBER, False), ("maxTokens", _NUMBER, False),
    ("headers", _STRING_MAP, False), ("compat", _COMPAT, False),
))
_MODEL_OVERRIDE: Final[_Shape] = ("object", (
    *_MODEL_FIELDS, ("cost", _COST_OVERRIDE, False), ("contextWindow", _NUMBER, False),
    ("maxTokens", _NUMBER, False), ("headers", _STRING_MAP, False), ("compat", _COMPAT, False),
))
_PROVIDER: Final[_Shape] = ("object", (
    ("name", _NAME, False), ("baseUrl", _NAME, False), ("apiKey", _NAME, False), ("api", _NAME, False),
    ("oauth", ("allOf", (_STRING, ("const", "radius"))), False), ("headers", _STRING_MAP, False),
    ("compat", _COMPAT, False), ("authHeader", _BOOLEAN, False), ("models", ("array", _MODEL), False),
    ("modelOverrides", ("record", _MODEL_OVERRIDE), False),
))
_MODELS_FILE: Final[_Shape] = ("object", (("providers", ("record", _PROVIDER), True),))
_TYPE_NAMES: Final = {"string": str, "boolean": bool}


def pi_schema_problems(value: Any) -> list[str]:
    """The lines pi prints under "Invalid models.json schema:" for this file's value (empty: pi accepts it)."""
    problems: list[str] = []
    _pi_check(value, _MODELS_FILE, (), problems)
    return problems[:_PI_ERROR_CAP]


def _pi_check(value: Any, shape: _Shape, path: tuple[str, ...], problems: list[str]) -> None:
    def say(message: str, at: tuple[str, ...] = path) -> None:
        problems.append(f"{'.'.join(at) or 'root'}: {message}")

    kind = shape[0]
    if kind in _TYPE_NAMES:
        if not isinstance(value, _TYPE_NAMES[kind]):
            say(f"must be {kind}")
        elif isinstance(value, str) and len(value) < shape[1]:
            say(f"must not have fewer than {shape[1]} characters")
    elif kind == "number":
        if not is_json_number(value):
            say("must be number")
    elif kind == "null":
        if value is not None:
            say("must be null")
    elif kind == "const":
        if value != shape[1]:
            say("must be equal to constant")
    elif kind in ("anyOf", "allOf"):
        found: list[str] = []
        for alternative in shape[1]:
            _pi_check(value, alternative, path, found)
        failed = len(found) > 0 if kind == "allOf" else len(found) >= len(shape[1])
        if failed:
            problems.extend(found)
            if kind == "anyOf":
                say("must match a schema in anyOf")
    elif kind == "array":
        if not isinstance(value, list):
            say("must be array")
            return
        for index, item in enumerate(value):
            _pi_check(item, shape[1], (*path, str(index)), problems)
    elif not isinstance(value, dict):
        say("must be object")
    elif kind == "record":
        for key, item in value.items():
            _pi_check(item, shape[1], (*path, key), problems)
    else:
        fields = shape[1]
        missing = [key for key, _, required in fields if required and key not in value]
        if missing:
            say(f"must have required properties {', '.join(missing)}", (*path, missing[0]))
        for key, field_shape, _ in fields:
            if key in value:
                _pi_check(value[key], field_shape, (*path, key), problems)


def load_model_registry(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> ModelRegistry:
    """Read `models.json`; a missing file gives an empty, unconfigured registry."""
    path_text = os.fspath(path)
    env = dict(os.environ if environ is None else environ)
    try:
        text = read_text_as_node(path_text)
    except (OSError, FileRefused) as error:
        raise WorkflowError("CONFIG_ERROR", f"{path_text}: {node_error_text(error, path_text)}") from None
    if text is None:
        return ModelRegistry(Path(path_text), False, {}, env)
    try:
        document = parse_json_document(text)
    except JsonSyntaxError as error:
        where = f"{path_text}:{error.location.line}:{error.location.column}" if error.location else path_text
        raise WorkflowError("CONFIG_ERROR", f"{where}: invalid JSON: {error.message}") from None
    providers = _Reader(path_text, document).providers(document.value)
    return ModelRegistry(Path(path_text), True, providers, env, document)
