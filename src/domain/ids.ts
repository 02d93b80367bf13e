// Branded identifiers. All ids are UUID strings on disk and on the wire.
import { Schema } from "effect"
import { randomUUID } from "node:crypto"

export const SessionId = Schema.UUID.pipe(Schema.brand("SessionId"))
export type SessionId = typeof SessionId.Type

export const AgentId = Schema.UUID.pipe(Schema.brand("AgentId"))
export type AgentId = typeof AgentId.Type

export const MessageId = Schema.UUID.pipe(Schema.brand("MessageId"))
export type MessageId = typeof MessageId.Type

export const WorkspaceId = Schema.UUID.pipe(Schema.brand("WorkspaceId"))
export type WorkspaceId = typeof WorkspaceId.Type

export const TurnId = Schema.UUID.pipe(Schema.brand("TurnId"))
export type TurnId = typeof TurnId.Type

// Id minting is pure enough for the domain (no I/O beyond the CSPRNG); callers that need
// determinism (tests, fuzzers) pass their own ids.
export const newSessionId = (): SessionId => SessionId.make(randomUUID())
export const newAgentId = (): AgentId => AgentId.make(randomUUID())
export const newMessageId = (): MessageId => MessageId.make(randomUUID())
export const newWorkspaceId = (): WorkspaceId => WorkspaceId.make(randomUUID())
export const newTurnId = (): TurnId => TurnId.make(randomUUID())
