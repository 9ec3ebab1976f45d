// The reference sagas of DESIGN.md, declared with the builder DSL.
#pragma once

#include "sagas/definition.h"

namespace sagad {

// incident_response v1: create_ticket, isolate_host, disable_account,
// notify_user (irreversible, waits for approval).
SagaDefinition IncidentResponse();
// order_fulfilment v1: reserve_inventory, charge_payment, create_shipment.
SagaDefinition OrderFulfilment();

}  // namespace sagad
