package template_test

import (
	"fmt"
	"log"

	"github.com/agentharness/harness/infra/template"
)

func Example() {
	tpl, err := template.Parse([]byte(`
Parameters:
  LogLevel: {Type: String, Default: INFO}
Resources:
  EventsTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: eventKey, AttributeType: S}]
      KeySchema: [{AttributeName: eventKey, KeyType: HASH}]
      TimeToLiveSpecification: {AttributeName: expiresAt, Enabled: true}
  Worker:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/worker/
      Environment:
        Variables:
          LOG_LEVEL: !Ref LogLevel
          EVENTS_TABLE: !Ref EventsTable
`))
	if err != nil {
		log.Fatal(err)
	}
	// Tests and the local runner give tables their own prefix.
	name := func(logicalID string) string { return "dev-" + logicalID }
	for _, t := range tpl.Tables() {
		fmt.Println(name(t.LogicalID), "expires by", t.TTLAttribute)
	}
	env, err := tpl.FunctionEnv(tpl.Functions()[0], name)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(env)
	// Output:
	// dev-EventsTable expires by expiresAt
	// map[EVENTS_TABLE:dev-EventsTable LOG_LEVEL:INFO]
}
