"""An agent on the scripted backend with the byte tokenizer and fake ports: the whole
turn loop in milliseconds, the model saying exactly what each test needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tests.support.agent_fakes import FakeIO, FakeShell, FakeWorkspace, MemorySessionIndex
from tests.support.memory_kv_store import MemoryKVStore
from tests.unit.generation.byte_tokenizer import ByteTokenizer

from ds4.adapters.compute.scripted import ScriptedRunner
from ds4.domain.agent.agent import Agent
from ds4.domain.agent.core import AgentCore, AgentSettings
from ds4.domain.agent.library import SessionLibrary
from ds4.domain.agent.toolbox import ToolBox
from ds4.domain.chat import ThinkMode
from ds4.domain.engine.session import EngineSession
from ds4.domain.sampling import SamplingParams

TOKENIZER = ByteTokenizer()
CTX = 16384


def call(name: str, **params: str) -> str:
    """A DSML invoke, as the model writes it."""
    body = "".join(
        f'<｜DSML｜parameter name="{k}" string="true">{v}</｜DSML｜parameter>\n'
        for k, v in params.items()
    )
    return f'<｜DSML｜invoke name="{name}">\n{body}</｜DSML｜invoke>\n'


def block(*invokes: str, thought: str = "ok") -> str:
    return f"{thought}</think>\n\n<｜DSML｜tool_calls>\n{''.join(invokes)}</｜DSML｜tool_calls>"


def answer(text: str, thought: str = "done") -> str:
    return f"{thought}</think>{text}"


@dataclass
class Rig:
    agent: Agent
    io: FakeIO
    workspace: FakeWorkspace
    shell: FakeShell
    runner: ScriptedRunner
    kv: MemoryKVStore
    index: MemorySessionIndex

    @property
    def core(self) -> AgentCore:
        return self.agent.core

    @property
    def transcript(self) -> str:
        return TOKENIZER.decode(self.core.conv.tokens)

    def fresh(self, outputs: Sequence[str], io: FakeIO | None = None) -> Rig:
        """Another agent process on the same saved sessions (a restart)."""
        return make_rig(outputs, io=io, kv=self.kv, index=self.index, workspace=self.workspace)


def make_rig(
    outputs: Sequence[str],
    *,
    io: FakeIO | None = None,
    ctx: int = CTX,
    files: dict[str, bytes] | None = None,
    kv: MemoryKVStore | None = None,
    index: MemorySessionIndex | None = None,
    workspace: FakeWorkspace | None = None,
    auto_approve: bool = False,
    max_tokens: int = 50_000,
    chunk: int = 512,
) -> Rig:
    io = io or FakeIO()
    workspace = workspace or FakeWorkspace(files)
    shell = FakeShell()
    runner = ScriptedRunner(list(outputs), TOKENIZER)
    kv = kv or MemoryKVStore()
    index = index or MemorySessionIndex()
    library = SessionLibrary(kv, index, model_tag=7, quant_bits=2, ctx=ctx)
    settings = AgentSettings(
        max_tokens=max_tokens,
        sampling=SamplingParams(temperature=0.0),
        mode=ThinkMode.HIGH,
        system="Be brief.",
        auto_approve=auto_approve,
    )
    tools = ToolBox(workspace, shell, None, edit_upto=False)
    session = EngineSession(runner.new_session(ctx), chunk=chunk)
    agent = Agent(AgentCore(session, TOKENIZER, settings, tools, io, library))
    agent.start()
    return Rig(agent, io, workspace, shell, runner, kv, index)
