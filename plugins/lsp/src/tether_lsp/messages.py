"""What tether and a server tell each other outside of requests: the capabilities tether declares at
`initialize`, and the handlers of what the server sends on its own (diagnostics published, the progress
and status that its rounds are read from, the settings and folders it asks for, and the edits `lsp_fix`
lets it apply while one of its commands runs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether_lsp.connection import Connection

log = logging.getLogger("tether.lsp")

OWN_PROGRESS = "tether-progress-"  # the prefix of the work-done tokens tether gives its requests


def message_field(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a message whose params pygls may hand over as an object or as a plain dict."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def client_capabilities(lsp: Any) -> Any:
    """What tether tells a server it can do (`initialize`)."""
    return lsp.ClientCapabilities(
        general=lsp.GeneralClientCapabilities(
            position_encodings=[lsp.PositionEncodingKind.Utf16, lsp.PositionEncodingKind.Utf8],
        ),
        window=lsp.WindowClientCapabilities(work_done_progress=True),
        workspace=lsp.WorkspaceClientCapabilities(
            configuration=True,
            workspace_folders=True,
            apply_edit=True,  # honoured only while lsp_fix runs a command (see _apply)
            did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True),
            workspace_edit=lsp.WorkspaceEditClientCapabilities(
                document_changes=True,
                resource_operations=[
                    lsp.ResourceOperationKind.Create,
                    lsp.ResourceOperationKind.Rename,
                    lsp.ResourceOperationKind.Delete,
                ],
            ),
            symbol=lsp.WorkspaceSymbolClientCapabilities(),
            # lsp_move asks willRenameFiles for the importers' edits and sends didRenameFiles after
            file_operations=lsp.FileOperationClientCapabilities(will_rename=True, did_rename=True),
        ),
        text_document=lsp.TextDocumentClientCapabilities(
            synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=True),
            publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
                version_support=True, related_information=False
            ),
            hover=lsp.HoverClientCapabilities(
                content_format=[lsp.MarkupKind.Markdown, lsp.MarkupKind.PlainText]
            ),
            definition=lsp.DefinitionClientCapabilities(link_support=True),
            type_definition=lsp.TypeDefinitionClientCapabilities(link_support=True),
            implementation=lsp.ImplementationClientCapabilities(link_support=True),
            references=lsp.ReferenceClientCapabilities(),
            document_symbol=lsp.DocumentSymbolClientCapabilities(hierarchical_document_symbol_support=True),
            code_action=lsp.CodeActionClientCapabilities(
                code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                    code_action_kind=lsp.ClientCodeActionKindOptions(value_set=list(lsp.CodeActionKind))
                )
            ),
            rename=lsp.RenameClientCapabilities(prepare_support=False),
            call_hierarchy=lsp.CallHierarchyClientCapabilities(),
            type_hierarchy=lsp.TypeHierarchyClientCapabilities(),
        ),
        experimental={"serverStatusNotification": True},
    )


def register_handlers(conn: Connection) -> None:
    """Answer what the server sends: its diagnostics (kept, `Connection.keep`), the progress and status its
    rounds are read from (`tether_lsp.rounds`), the settings and folders it asks for, the edits `lsp_fix` lets
    it apply; its logs kept for the errors that quote them; the rest acknowledged."""
    lsp = conn.lsp
    client = conn.client

    @client.feature("textDocument/publishDiagnostics")
    def _publish(params: Any) -> None:
        if conn.server.rounds == "tsserver":
            return  # its pushes can be a half round (see rounds.round_done); tsserver is asked instead
        if conn.open_files and params.uri not in conn.docs:
            return  # the clearing of a document closed in open-files mode: its errors are not known now
        if params.version is not None:
            conn.versioned = True
        if conn.server.round_titles and not conn.round_seen and conn.rounds == "progress":
            # a diagnosis that reported no round: every later one would wait PROGRESS_FALLBACK_SEEN
            conn.rounds = "document"
            log.warning(
                "%s published diagnostics outside any %s progress: its rounds are read from its publishes",
                conn.server.id,
                "/".join(conn.server.round_titles),
            )
        conn.last_event = time.monotonic()
        conn.keep(params.uri, params.version, list(params.diagnostics), conn.last_event)
        conn.wake()

    @client.feature("workspace/configuration")
    def _configuration(params: Any) -> list[Any]:
        return [conn.server.setting(item.section, conn.open_files) for item in params.items]

    @client.feature("workspace/workspaceFolders")
    def _folders(params: Any) -> list[Any]:
        return [lsp.WorkspaceFolder(uri=conn.root.as_uri(), name=conn.root.name or "root")]

    @client.feature("window/workDoneProgress/create")
    def _progress_create(params: Any) -> None:
        conn.last_create = time.monotonic()  # a round may begin (see rounds.round_done)
        return None

    @client.feature("$/progress")
    def _progress(params: Any) -> None:
        token = str(message_field(params, "token"))
        if token.startswith(OWN_PROGRESS):
            return  # a request's own progress (see Connection.own_token), not an analysis round
        value = message_field(params, "value")
        kind = message_field(value, "kind")
        if kind == "begin":
            title = str(message_field(value, "title", "") or "")
            if conn.server.round_titles and title.startswith(conn.server.round_titles):
                conn.round_seen = True
                if conn.rounds != conn.server.rounds:
                    # its first publish came before its first round's begin: it does report rounds
                    conn.rounds = conn.server.rounds
                    log.warning(
                        "%s began a %s round: its rounds are read from its progress again",
                        conn.server.id,
                        title,
                    )
            conn.progress_tokens.add(token)
            conn.begins += 1
            conn.last_event = time.monotonic()
            conn.progress_titles[token] = (title, conn.last_event)
        elif kind == "end":
            conn.progress_tokens.discard(token)
            conn.progress_titles.pop(token, None)
            conn.last_event = time.monotonic()
            if not conn.progress_tokens and conn.first_end is None:
                conn.first_end = conn.last_event
            conn.wake()

    @client.feature("experimental/serverStatus")
    def _status(params: Any) -> None:
        conn.quiescent = bool(message_field(params, "quiescent", True))
        conn.wake()

    @client.feature("client/registerCapability")
    def _register(params: Any) -> None:
        return None

    @client.feature("client/unregisterCapability")
    def _unregister(params: Any) -> None:
        return None

    @client.feature("window/showMessageRequest")
    def _show_request(params: Any) -> None:
        return None

    @client.feature("workspace/applyEdit")
    async def _apply(params: Any) -> Any:
        # honoured only while `lsp_fix` runs a command of this server (`apply_edit`, through its write path)
        if conn.apply_edit is None:
            return lsp.ApplyWorkspaceEditResult(
                applied=False,
                failure_reason="tether applies a server's edit only while lsp_fix runs one of its commands",
            )
        return await conn.apply_edit(message_field(params, "edit"))

    for method in ("window/logMessage", "window/showMessage", "telemetry/event", "$/logTrace"):
        client.feature(method)(
            lambda params, m=method: conn.log_tail.append(
                f"{m}: {str(message_field(params, 'message', ''))[:200]}"
            )
        )
    for method in (
        "workspace/semanticTokens/refresh",
        "workspace/inlayHint/refresh",
        "workspace/codeLens/refresh",
        "workspace/diagnostic/refresh",
        "workspace/inlineValue/refresh",
        "workspace/foldingRange/refresh",
    ):
        client.feature(method)(lambda params: None)
