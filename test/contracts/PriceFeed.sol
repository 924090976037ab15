// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// Chainlink's AggregatorV3Interface as it publishes it (smartcontractkit/chainlink,
/// contracts/src/v0.8/shared/interfaces/AggregatorV3Interface.sol; docs.chain.link/data-feeds/api-reference).
interface AggregatorV3Interface {
    function decimals() external view returns (uint8);

    function description() external view returns (string memory);

    function version() external view returns (uint256);

    function getRoundData(uint80 _roundId)
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);
}

/// A test price feed behind that interface. The test writes each round as a feed's oracles would,
/// and also the rounds a consumer must refuse: an answer of zero or below, a round not yet complete
/// (updatedAt 0), an answer carried over from an earlier round (answeredInRound below roundId), an
/// answer older than the feed's heartbeat. Like a real aggregator, it reverts with "No data present"
/// for a round it does not have.
contract TestAggregator is AggregatorV3Interface {
    struct Round {
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
        uint80 answeredInRound;
    }

    uint8 public immutable override decimals;
    string public override description;
    uint256 public constant override version = 4;
    uint80 public latestRound;
    mapping(uint80 => Round) internal rounds;

    constructor(uint8 decimals_, string memory description_) {
        decimals = decimals_;
        description = description_;
    }

    /// Writes the next round. answeredInRound 0: the round answers itself (a complete round).
    function setRound(int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound) external {
        latestRound += 1;
        rounds[latestRound] = Round(answer, startedAt, updatedAt, answeredInRound == 0 ? latestRound : answeredInRound);
    }

    function getRoundData(uint80 _roundId)
        public
        view
        override
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        require(_roundId != 0 && _roundId <= latestRound, "No data present");
        Round memory r = rounds[_roundId];
        return (_roundId, r.answer, r.startedAt, r.updatedAt, r.answeredInRound);
    }

    function latestRoundData()
        external
        view
        override
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        return getRoundData(latestRound);
    }
}
