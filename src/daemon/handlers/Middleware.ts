// The one door every admin method passes (the `AdminMiddleware` of the contract,
// src/protocol/admin/common.ts), for the socket and the HTTP API alike:
//  - a method annotated `Mutation` is refused with `Unavailable` while the daemon is read-only
//    (a full or failing disk: Storage.ts), and once begun runs to completion even if its client
//    goes away (an interrupted create or terminate would leave half a change behind); a storage
//    fault it fails with turns the daemon read-only;
//  - a method annotated `Traced` opens its request span (`user.<method>`, the root of its trace);
//  - the services' typed errors become the four wire errors (WireErrors.ts), a defect `Internal`
//    (the daemon never dies of a request).
// Handlers are therefore plain Effects that fail with the services' errors (`ServiceHandlers`).
import type * as Rpc from "@effect/rpc/Rpc"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import type * as RpcSchema from "@effect/rpc/RpcSchema"
import { Context, Effect, Layer, type Scope, type Stream } from "effect"
import { Tracing } from "../../telemetry/Tracing.js"
import { DaemonControl } from "../DaemonControl.js"
import { AdminMiddleware, Internal, Mutation, Traced, Unavailable } from "../../protocol/AdminRpcs.js"
import { classify, message, type ServiceError } from "../../protocol/WireErrors.js"

export const AdminMiddlewareLive: Layer.Layer<AdminMiddleware, never, DaemonControl> = Layer.effect(
  AdminMiddleware,
  Effect.gen(function*() {
    const storage = (yield* DaemonControl).storage
    const tracing = yield* Tracing
    return AdminMiddleware.of(({ next, rpc }) => {
      const mutation = Context.get(rpc.annotations, Mutation)
      const answered = next.pipe(
        Effect.catchAll((e) =>
          Effect.suspend(() => {
            const { fault, wire } = classify(e)
            if (mutation && fault !== undefined) storage.enterReadOnly(wire.message)
            return Effect.fail(wire)
          })
        ),
        Effect.catchAllDefect((d) => Effect.logError("handler defect", d).pipe(Effect.zipRight(Effect.fail(new Internal({ message: message(d) })))))
      )
      const traced = tracing.enabled && Context.get(rpc.annotations, Traced)
        ? Effect.withSpan(answered, `user.${rpc._tag}`, { root: true, kind: "server", attributes: { "rpc.method": rpc._tag } })
        : answered
      if (!mutation) return traced
      return Effect.suspend(() =>
        storage.readOnly() ? Effect.fail(new Unavailable({ message: storage.refusal() })) : Effect.uninterruptible(traced)
      )
    })
  })
)

/** What a handler answers: the method's success (or stream of it), failing with the services' errors. */
type ServiceResult<R> = R extends Rpc.Rpc<infer _Tag, infer _Payload, infer Success, infer _Error, infer _Middleware>
  ? [Success] extends [RpcSchema.Stream<infer A, infer _E>] ? Stream.Stream<A["Type"], ServiceError>
  : Effect.Effect<Success["Type"], ServiceError>
  : never

/** A group's handlers as plain Effects of the services (their errors are mapped by the middleware). */
export type ServiceHandlers<Rpcs extends Rpc.Any> = {
  readonly [R in Rpcs as R["_tag"]]: (payload: Rpc.Payload<R>) => ServiceResult<R>
}

/**
 * A group's handlers as a layer of the RpcServer. The cast is the one place where the handlers'
 * error type (the services' errors) meets the contract's (the wire errors): the middleware,
 * which every method of the contract names, maps one to the other before anything is encoded.
 * The handlers capture their services when built (ServiceHandlers require nothing), so the context
 * kept for running them is empty: RpcServer merges it into every request's runtime.
 */
export const served = <Rpcs extends Rpc.Any, E, R>(
  group: RpcGroup.RpcGroup<Rpcs>,
  build: Effect.Effect<ServiceHandlers<Rpcs>, E, R>
): Layer.Layer<Rpc.ToHandler<Rpcs>, E, Exclude<R, Scope.Scope>> =>
  Layer.scopedContext(Effect.flatMap(build, (handlers) => {
    const context = group.toHandlersContext(handlers as unknown as RpcGroup.HandlersFrom<Rpcs>) as Effect.Effect<Context.Context<Rpc.ToHandler<Rpcs>>>
    return Effect.provide(context, Context.empty())
  }))

/** Types a group's handlers as `ServiceHandlers` (payloads typed from the contract). */
export const handlersOf = <Rpcs extends Rpc.Any>(_group: RpcGroup.RpcGroup<Rpcs>) => (handlers: ServiceHandlers<Rpcs>): ServiceHandlers<Rpcs> =>
  handlers
